"""Every documented command runs as written: the shell commands in README.md, docs/*.md
and tasks/*/README.md code blocks name an executable that exists, a sub-command that
exists, and options its parser knows (``--help``-level, no model runs); the cheap ones
run end to end.

Code blocks tagged ``bash``/``sh``/``shell`` (or untagged) are commands line by line
(``\\`` continuations joined, comments and output skipped: a line is a command when its
first word is one of :data:`COMMAND_WORDS`); in ``console``/``text`` blocks only ``$ ``
lines are. ``KEY=VALUE`` prefixes, ``&&``/``;``/``|`` chains and ``[optional]`` brackets
are understood; placeholders (``RESULTS``, ``OUT``, ``...``) are not checked.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "tasks").glob("*/README.md"))]
#: what starts a command line in an untagged block (everything else is output or a diagram)
COMMAND_WORDS = {
    "lmms-scene",
    "python",
    "python3",
    "lmms_eval",
    "lmms-eval",
    "accelerate",
    "make",
    "pip",
    "hf",
    "huggingface-cli",
    "source",
    "sudo",
    "apt-get",
    "export",
    "git",
    "cd",
    "chromium",
    "npm",
}
#: executables a command may use that are not ours (checked to exist on PATH or in the venv)
SYSTEM = {"cd", "source", "export", "git", "sudo", "apt-get", "chromium", "npm", "pip", "echo", "cat", "ls"}


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for every documented shell command."""
    out = []
    for f in DOCS:
        text = f.read_text(encoding="utf-8")
        for block in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, flags=re.M | re.S):
            lang, body = block.group(1), block.group(2)
            if lang not in ("bash", "sh", "shell", "console", "text", ""):
                continue
            line_no = text[: block.start()].count("\n") + 2
            body = re.sub(r"\\\n\s*", " ", body)
            for k, line in enumerate(body.splitlines()):
                s = line.strip()
                if lang in ("console", "text"):
                    if not s.startswith("$ "):
                        continue
                    s = s[2:].strip()
                s = re.sub(r"\s+#\s.*$", "", s)  # a trailing comment
                s = re.split(r"\s{3,}", s)[0]  # a command list: "command    what it does"
                if not s or s.startswith("#") or re.match(r"^\S+ [\w-]+:( |$)", s):  # output ("lmms-scene eval: ...")
                    continue
                for part in re.split(r"\s*(?:&&|;|\|\|)\s*", s):
                    part = part.split(" | ")[0].strip()
                    words = part.split()
                    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                        words = words[1:]
                    if words and words[0] in COMMAND_WORDS:
                        out.append((f"{f.relative_to(REPO)}:{line_no + k}", " ".join(words)))
    return out


def _tokens(command: str) -> list[str]:
    command = command.replace("[", " ").replace("]", " ")
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


@functools.cache
def scene_parser() -> argparse.ArgumentParser:
    from lmms_scene.cli import parser

    return parser()


@functools.cache
def harness_parser() -> argparse.ArgumentParser:
    import lmms_eval.__main__ as harness

    argv = sys.argv
    sys.argv = ["lmms_eval"]
    try:
        parser, _ = harness.parse_eval_args()
    finally:
        sys.argv = argv
    return parser


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _unknown_options(p: argparse.ArgumentParser, args: list[str], extra: set[str] = frozenset()) -> list[str]:
    known = set(p._option_string_actions) | set(extra)
    return [a.split("=", 1)[0] for a in args if a.startswith("--") and a.split("=", 1)[0] not in known]


def check_scene(args: list[str]) -> str | None:
    """Why ``lmms-scene ARGS`` would not parse (None: it would)."""
    p = scene_parser()
    top = set(p._option_string_actions)
    chain = []
    while True:
        subs = _subparsers(p)
        if not subs:
            break
        name = next((a for a in args if not a.startswith("-")), None)
        if name is None:
            return None if not chain else f"`lmms-scene {' '.join(chain)}` needs a sub-command"
        if "|" in name:  # alternatives in a command list: "pfram extract|score|correlate"
            rest = args[args.index(name) + 1 :]
            for alt in name.split("|"):
                problem = check_scene([*chain, alt, *rest][len(chain) :]) if not chain else None
                if chain:
                    sub = subs.get(alt)
                    problem = (
                        None if sub is not None else f"`lmms-scene {' '.join([*chain, alt])}`: no such sub-command"
                    )
                if problem:
                    return problem
            return None
        if name not in subs:
            return f"`lmms-scene {' '.join([*chain, name])}`: no such sub-command (there are {', '.join(sorted(subs))})"
        chain.append(name)
        args = args[args.index(name) + 1 :]
        p = subs[name]
    passthrough = chain and chain[0] in ("eval", "demo")
    if passthrough:
        unknown = _unknown_options(harness_parser(), [a for a in args if a not in p._option_string_actions], top)
    else:
        unknown = _unknown_options(p, args, top)
    if unknown:
        return f"`lmms-scene {' '.join(chain)}`: unknown option(s) {unknown}"
    given = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    for action in p._actions:
        if action.required and action.option_strings and not given & set(action.option_strings):
            return f"`lmms-scene {' '.join(chain)}`: the required option {action.option_strings[0]} is missing"
    for group in p._mutually_exclusive_groups:
        options = {o for a in group._group_actions for o in a.option_strings}
        if group.required and not given & options:
            return f"`lmms-scene {' '.join(chain)}`: needs one of {sorted(options)}"
    return None


@functools.cache
def harness_subcommands() -> dict[str, argparse.ArgumentParser]:
    """The harness's own sub-commands (``tasks``, ``models``, ...) and their parsers; ``eval``
    is the flat form's parser (:func:`harness_parser`)."""
    from lmms_eval.cli import dispatch

    return {name: sub for name, sub in _subparsers(dispatch._build_parser()).items() if name != "eval"}


def check_harness(args: list[str]) -> str | None:
    """Why ``python -m lmms_eval ARGS`` would not parse: the flat evaluation form (or ``eval``),
    or one of the harness's sub-commands with its own flags (``tasks --include-path``)."""
    subs = harness_subcommands()
    if args and args[0] in subs:
        p = subs[args[0]]
        unknown = _unknown_options(p, args[1:])
        if unknown:
            return f"`python -m lmms_eval {args[0]}`: unknown option(s) {unknown}"
        positional = [a for a in args[1:] if not a.startswith("-") and not a.startswith("$(")]
        choices = [a.choices for a in p._actions if not a.option_strings and a.choices]
        taken = {a for a in positional if any(a in c for c in choices)}
        values = {args[i + 1] for i, a in enumerate(args[1:-1], 1) if a.startswith("--") and "=" not in a}
        stray = [a for a in positional if a not in taken and a not in values]
        return f"`python -m lmms_eval {args[0]}`: unexpected argument(s) {stray}" if stray else None
    if args[:1] == ["eval"]:
        args = args[1:]
    unknown = _unknown_options(harness_parser(), args)
    return f"`python -m lmms_eval`: unknown option(s) {unknown}" if unknown else None


@functools.cache
def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO / "Makefile").read_text(), flags=re.M))


@functools.cache
def hf_command(sub: str) -> bool:
    hf = Path(sys.executable).with_name("hf")
    proc = subprocess.run([str(hf), sub, "--help"], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0


def check(command: str) -> str | None:
    words = _tokens(command)
    exe, args = words[0], words[1:]
    if exe == "lmms-scene":
        return check_scene(args)
    if exe in ("python", "python3"):
        if args[:1] == ["-m"] and len(args) > 1:
            module = args[1]
            if module == "lmms_eval":
                return check_harness(args[2:])
            if importlib.util.find_spec(module) is None:
                return f"`python -m {module}`: no such module"
            if module == "lmms_scene.cli":
                return check_scene(args[2:])
            return None
        script = next((a for a in args if a.endswith(".py")), None)
        if script and not (REPO / script).is_file():
            return f"`python {script}`: no such file in the repository"
        return None
    if exe == "accelerate":
        if "-m" in args and args[args.index("-m") + 1] == "lmms_eval":
            return check_harness(args[args.index("-m") + 2 :])
        return None
    if exe == "make":
        missing = [t for t in args if not t.startswith("-") and "=" not in t and t not in make_targets()]
        return f"`make {' '.join(missing)}`: no such target in the Makefile" if missing else None
    if exe == "hf":
        return None if args and hf_command(args[0]) else f"`hf {' '.join(args[:1])}`: no such hf command"
    if exe in SYSTEM:
        return None
    return (
        f"`{exe}`: no such executable (the harness installs `lmms-eval` and `python -m lmms_eval`)"
        if exe in ("lmms_eval",)
        else f"`{exe}`: not an executable the docs may name"
    )


COMMANDS = documented_commands()


def test_the_docs_hold_commands():
    # the extraction is not vacuous: the README's and the docs' main commands are found
    found = [c for _, c in COMMANDS]
    assert len(found) > 60
    assert any(c.startswith("make demo") for c in found) and any(c.startswith("make test") for c in found)
    assert any(c.startswith("lmms-scene eval") for c in found) and any("python -m lmms_eval" in c for c in found)


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_parses(where, command):
    problem = check(command)
    assert problem is None, f"{where}: {command}\n  -> {problem}"


def test_the_checker_finds_what_is_wrong():
    assert "no such executable" in check("lmms_eval --include_path X --tasks cooco")
    assert "no such sub-command" in check("lmms-scene publihs cooco --repo a/b")
    assert "unknown option(s) ['--dryrun']" in check("lmms-scene publish cooco --repo a/b --dryrun OUT")
    assert "unknown option(s) ['--taks']" in check("python -m lmms_eval --model echo --taks cooco")
    # the harness's own sub-commands have flags of their own (tasks: --include-path, with a hyphen)
    assert "unknown option(s) ['--include_path']" in check(
        'python -m lmms_eval tasks --include_path "$(lmms-scene tasks-path)"'
    )
    assert "unexpected argument(s) ['lsit']" in check("python -m lmms_eval tasks lsit")
    assert check('python -m lmms_eval tasks list --include-path "$(lmms-scene tasks-path)"') is None
    assert "no such target" in check("make tests")
    assert "no such hf command" in check("hf downlaod openai/clip-vit-base-patch32")
    assert "needs one of ['--dataset', '--from-folder', '--from-hub']" in check(
        "lmms-scene publish snus --repo a/b --dry-run OUT"
    )
    assert "the required option --out is missing" in check("lmms-scene report results/")
    assert check("lmms-scene build cooco --from-folder D --out E") is None
    assert check("lmms-scene eval --model qwen2_5_vl --tasks cooco --batch_size 1") is None


CHEAP = [c for _, c in COMMANDS if re.fullmatch(r"lmms-scene (tasks-path|--help|[a-z-]+ --help)", c)]


@pytest.mark.parametrize("command", sorted(set(CHEAP)))
def test_a_cheap_documented_command_runs(command):
    exe = shutil.which("lmms-scene") or str(Path(sys.executable).with_name("lmms-scene"))
    proc = subprocess.run([exe, *shlex.split(command)[1:]], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()
