"""Running the harness on lmms-scene's tasks: ``lmms-scene eval`` and ``lmms-scene demo``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

from lmms_scene import benchmarks, compat, harness, preflight, settings
from lmms_scene import journal as J
from lmms_scene.files import iter_jsonl, write_atomic
from lmms_scene.judges import parse_judges
from lmms_scene.metrics import clip
from lmms_scene.registration import tasks_path
from lmms_scene.report.html import build_report
from lmms_scene.report.submission import Refused, build
from lmms_scene.report.text import show_text


def run_harness(argv: list[str], *, journal: bool | None = None) -> int:
    """Run ``lmms_eval`` in this process with our tasks registered.

    lmms-eval 0.7.3 logs a failed evaluation and exits 0; this returns 1 instead, so
    scripts and CI notice. ``--help`` and ``--tasks list`` behave as in the harness.

    Generations are journaled as they arrive (:mod:`lmms_scene.journal`; ``journal=False``
    or ``LMMS_SCENE_JOURNAL=off``: not), and SIGTERM / SIGINT stop the run cleanly: what
    was generated is on disk, and this returns 128 + the signal's number after saying how
    to score it (``lmms-scene rescore``).
    """
    if not harness.install():
        argv = [*argv, "--include_path", str(tasks_path())]
    config = settings.current()
    for note in check_settings(config, argv):  # a bad setting stops here, before the model loads
        print(f"lmms-scene eval: {note}", file=sys.stderr)
    keep_journal = config.journal if journal is None else journal
    chunk = config.journal_chunk_size
    argv, resume_from = _pop_resume(argv)
    # every requested task's data and checkpoints, before the harness loads the model: all
    # problems at once, one line per task (the plain route runs the same check itself)
    problems = preflight.check_argv(argv)
    if problems:
        preflight.report(problems)
        return 1
    resume = None
    if resume_from is not None:
        if not keep_journal:
            raise ValueError(
                "--resume serves an interrupted run's journal and needs the journal on (LMMS_SCENE_JOURNAL is off)"
            )
        resume = J.read(J.journal_files(resume_from))
        for problem in [*resume.problems, *J.unverified_notes(resume)]:
            print(f"lmms-scene eval: --resume: {problem}", file=sys.stderr)
        print(
            f"lmms-scene eval: resuming {', '.join(map(str, resume.files))} ({resume.status()}): "
            f"{sum(len(v) for v in resume.outputs.values())} outputs served from it, the rest generated",
            file=sys.stderr,
        )
    failures: list[BaseException] = []
    cli = compat.HarnessCLI(argv, failures.append)  # imports the harness's __main__
    original_evaluate = None
    if keep_journal:
        original_evaluate = compat.evaluator_module().evaluate
        J.install(None, chunk, announce=lambda message: print(message, file=sys.stderr), resume=resume)
        if not _output_path_of(argv):
            print(
                "lmms-scene eval: no --output_path, so the harness saves nothing and no journal is kept",
                file=sys.stderr,
            )

    J.ACTIVE.journal = None
    handlers = None
    preflight.mark_done()  # checked above: the plain route's hook stays quiet in this run
    started = time.time()
    try:
        with cli as cli_evaluate:
            handlers = J.catch_signals()
            cli_evaluate()
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except KeyboardInterrupt as stop:
        return _interrupted(stop)
    except Exception as err:  # re-raised by the harness under --verbosity DEBUG
        if err not in failures:
            failures.append(err)
    finally:
        preflight.mark_done(False)
        if handlers is not None:
            J.restore_signals(handlers)
        if original_evaluate is not None:
            compat.evaluator_module().evaluate = original_evaluate
    stops = [f for f in failures if isinstance(f, KeyboardInterrupt)]
    if stops:
        return _interrupted(stops[-1])
    if failures:
        cause = root_cause(failures[-1])
        print(f"lmms-scene eval: the evaluation failed: {type(cause).__name__}: {cause}", file=sys.stderr)
        hint = data_hint(_tasks_of(argv), cause)
        if hint:
            print(f"lmms-scene eval: {hint}", file=sys.stderr)
        journal = J.ACTIVE.journal
        done = journal.done if journal is not None else 0  # counted from the file: read it once
        if done:
            print(
                f"lmms-scene eval: the {done} generations made before the failure are in {journal.path}; "
                f"score them with: lmms-scene rescore {journal.path} --output_path OUT",
                file=sys.stderr,
            )
        return 1
    return _files_written(argv, started)


def _files_written(argv: list[str], started: float) -> int:
    """After the harness: the run is finished only when its files are. The results JSON
    and every samples file are read back (:func:`missing_files`); a shortfall (a full disk,
    a permission, a killed writer: the harness only logs a warning) is one line naming
    what is missing, where the outputs are and the command that scores them; exit 1."""
    out = _output_path_of(argv)
    if not out or "--help" in argv or "-h" in argv or settings.process_group()[0] != 0:
        return 0
    journal = J.ACTIVE.journal
    planned = J.planned_docs(journal.path) if journal is not None else None
    problems = missing_files(Path(out), started, planned, log_samples="--log_samples" in argv)
    if not problems:
        return 0
    where = "; no journal was kept (LMMS_SCENE_JOURNAL off, or a rescore): run it again once the files can be written"
    if journal is not None:
        done = journal.done
        target = Path(out) / "rescored"
        where = (
            f"; the {done} outputs are in {journal.path}: score them with "
            f"lmms-scene rescore {journal.path} --output_path {target}"
        )
    print(
        f"lmms-scene eval: the run is not finished, its files are incomplete: {'; '.join(problems)}{where}",
        file=sys.stderr,
    )
    return 1


def missing_files(output_path: Path, started: float, planned: dict[str, int] | None, log_samples: bool) -> list[str]:
    """What a finished run should have written under ``output_path`` since ``started`` and
    did not: the results JSON (present, complete JSON) and, with ``log_samples``, one
    samples file per task, each line JSON, as many rows as documents planned (``planned``:
    task -> documents, from the journal's plan; else the results JSON's ``n-samples``)."""
    output_path = Path(output_path)
    fresh = lambda p: J.FOLDER not in p.parts and p.stat().st_mtime >= started - 1  # noqa: E731
    results = sorted((p for p in output_path.rglob("*_results.json") if fresh(p)), key=lambda p: p.stat().st_mtime)
    problems: list[str] = []
    data = None
    if not results:
        problems.append(f"no results JSON was written under {output_path}")
    else:
        try:
            data = json.loads(results[-1].read_text(encoding="utf-8"))
            if not isinstance(data, dict) or "results" not in data:
                problems.append(f"{results[-1]} holds no results")
                data = None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            size = results[-1].stat().st_size
            problems.append(f"{results[-1]} is cut short or unreadable ({size} bytes: {getattr(exc, 'msg', exc)})")
    if not log_samples:
        return problems
    expected = dict(planned or {})
    if not expected and data is not None:
        expected = {t: int((n or {}).get("effective", 0)) for t, n in (data.get("n-samples") or {}).items()}
    if not expected:
        return problems
    stem = results[-1].name.removesuffix("_results.json") if results else None
    for task, docs in sorted(expected.items()):
        found = sorted(
            (p for p in output_path.rglob(f"*_samples_{task}.jsonl") if fresh(p)), key=lambda p: p.stat().st_mtime
        )
        if stem is not None:
            found = [p for p in found if p.name.startswith(stem + "_samples_")] or found
        if not found:
            problems.append(f"no samples file for {task} ({docs} documents)")
            continue
        rows, bad = 0, None
        try:
            with found[-1].open(encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        json.loads(line)
                    except json.JSONDecodeError:
                        bad = number
                        break
                    rows += 1
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{found[-1]} cannot be read ({exc})")
            continue
        if bad is not None:
            problems.append(f"{found[-1]} line {bad} is cut short ({rows} of {docs} rows before it)")
        elif rows != docs:
            problems.append(f"{found[-1]} holds {rows} of {docs} rows")
    return problems


def check_settings(config: settings.Settings, argv: list[str]) -> list[str]:
    """Every setting with its rule (:meth:`lmms_scene.settings.Settings.check`), the judges
    of ``LMMS_SCENE_CESG`` (:func:`lmms_scene.judges.parse_judges`: one judge, an http(s)
    URL with a host) and a ``device=`` in ``--model_args`` checked against the devices
    torch sees; a bad value is a ``ValueError`` naming it. Returns notes (what was adjusted)."""
    notes = config.check()
    for key, value in settings.cesg_fields(config.cesg).items():
        if key in ("extra", "verifier"):
            try:
                found = parse_judges(value)
            except (ValueError, TypeError) as exc:
                raise settings.SettingError(f"{settings.CESG_ENV} {key}: {exc}") from None
            if len(found) != 1:
                raise settings.SettingError(
                    f"{settings.CESG_ENV} {key}={value!r}: expected one judge, got {len(found)}"
                )
    for i, arg in enumerate(argv):
        value = (
            argv[i + 1]
            if arg == "--model_args" and i + 1 < len(argv)
            else arg.split("=", 1)[1]
            if arg.startswith("--model_args=")
            else None
        )
        for part in (value or "").split(","):
            key, sep, device = part.partition("=")
            if sep and key.strip() == "device":
                settings.check_device(device, "--model_args device")
    return notes


def _interrupted(stop: BaseException) -> int:
    """Say what an interrupted run left on disk and how to score it; the exit code."""
    name = getattr(stop, "signal_name", "SIGINT")
    signum = getattr(stop, "signum", 2)
    journal = J.ACTIVE.journal
    if journal is None:
        print(f"lmms-scene eval: stopped by {name} before the model generated anything (no journal)", file=sys.stderr)
    else:
        total = f" of {journal.total}" if journal.total else ""
        done = journal.done  # counted from the file: read it once
        print(f"lmms-scene eval: stopped by {name}; {done}{total} generations are in {journal.path}", file=sys.stderr)
        if done:
            print(
                f"lmms-scene eval: score them with: lmms-scene rescore {journal.path} --output_path OUT",
                file=sys.stderr,
            )
    return 128 + int(signum)


def _pop_resume(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without lmms-scene's own ``--resume JOURNAL``, and that journal (or None)."""
    out, resume, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--resume":
            if i + 1 >= len(argv):
                raise ValueError("--resume: give the interrupted run's journal (a file, or its --output_path folder)")
            resume, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--resume="):
            resume = arg.split("=", 1)[1]
        else:
            out.append(arg)
        i += 1
    return out, resume


def _output_path_of(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in ("--output_path", "--output-path") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--output_path="):
            return arg.split("=", 1)[1]
    return None


def root_cause(err: BaseException) -> BaseException:
    """The error behind the harness's wrappers (tenacity's ``RetryError`` after its 5
    attempts at ``process_results``, chained exceptions), stopping at an lmms-scene error
    (whose message says what to do)."""
    seen = set()
    while id(err) not in seen:
        seen.add(id(err))
        inner = compat.retry_cause(err)  # touch point retry-error
        if inner is not None:
            err = inner
            continue
        if err.__cause__ is not None and not type(err).__module__.startswith("lmms_scene"):
            # our own errors already say what went wrong and what to do: never the hub's cause behind them
            err = err.__cause__
            continue
        break
    return err


def _tasks_of(argv: list[str]) -> list[str]:
    for i, arg in enumerate(argv):
        if arg == "--tasks" and i + 1 < len(argv):
            return [t for t in argv[i + 1].split(",") if t]
        if arg.startswith("--tasks="):
            return [t for t in arg.split("=", 1)[1].split(",") if t]
    return []


#: error names that mean a dataset could not be fetched from the hub
_OFFLINE_ERRORS = (
    "ConnectionError",
    "OfflineModeIsEnabled",
    "LocalEntryNotFoundError",
    "DatasetNotFoundError",
    "HfHubHTTPError",
    "MaxRetryError",
    "NameResolutionError",
)


def data_hint(tasks: list[str], err: BaseException) -> str | None:
    """What to do when one of our hub-backed tasks could not load its data: build it
    locally (the registry's ``build_hint``)."""
    text = f"{type(err).__name__}: {err}"
    if not any(name in text for name in _OFFLINE_ERRORS):
        return None
    hints = []
    for task in tasks:
        try:
            bench = benchmarks.benchmark_of_task(task)
        except ValueError:
            continue
        if bench.build_hint and task not in bench.sample_tasks and bench.build_hint not in hints:
            hints.append(bench.build_hint)
    if not hints:
        return None
    return "the data could not be loaded from the Hugging Face hub (offline?). " + " ".join(hints)


def _clip_for_demo() -> None:
    """The demo runs offline: with no CLIP checkpoint at hand, the sample tasks record the
    CLIP metrics as not computed (:func:`lmms_scene.metrics.clip.for_sample_run`); the demo
    says so before it starts."""
    if settings.current().clip_model_explicit or clip.default_model_cached():
        return
    _say(
        f"lmms-scene demo: {clip.DEFAULT_CLIP_MODEL} is not in the local Hugging Face cache, so the CLIP metrics "
        "(COOCO's RefCLIPScore, accuracy, output-scene similarity, context capture; SNUS's CLIPScore) are recorded as "
        f"not computed. Get it once with `{clip.fetch_command()}` or set {clip.CLIP_MODEL_ENV}=<local CLIP folder> to compute them."
    )


#: what the demo's harness run prints that nobody reads: Java's tokenizer chatter and the
#: harness's own progress bars (it passes ``disable=`` to tqdm itself, so TQDM_DISABLE misses them)
_DEMO_NOISE = re.compile(r"^(PTBTokenizer tokenized|.*\d+%\|.*(it|s)/s\]|.*\d+/\d+ \[\d\d:\d\d<)")
#: the demo's harness run: no progress bars, the harness at WARNING (its INFO lines are for debugging)
DEMO_QUIET = {
    "TQDM_DISABLE": "1",
    "LMMS_SCENE_NO_PROGRESS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
}
#: the longest line the demo prints
DEMO_WIDTH = 160


def _say(message: str) -> None:
    print(textwrap.fill(message, DEMO_WIDTH, subsequent_indent="  ", break_on_hyphens=False))


def demo(output_path: str | Path = "results", extra: list[str] | None = None) -> int:
    """Every built benchmark's sample tasks with the ``scene_blind`` baseline, then the
    readable tables of the results (``lmms-scene show``), the HTML report and the refused
    submission; it ends with the three paths a user needs. The harness runs in a child
    process with its log level at WARNING and no progress bars, so what is printed is
    the harness's own table and ours (no line over :data:`DEMO_WIDTH` characters)."""
    for bench in benchmarks.BENCHMARKS:
        if not bench.built():
            _say(f"lmms-scene demo: {bench.title} is not built yet in this version; skipping it.")
    tasks = [t for bench in benchmarks.built() for t in bench.sample_tasks]
    if not tasks:
        print("lmms-scene demo: no benchmark is built yet; nothing to run.", file=sys.stderr)
        return 1
    _clip_for_demo()
    out = Path(output_path).resolve()
    started = time.time()
    env = {**os.environ, **DEMO_QUIET}
    cmd = [
        sys.executable,
        "-m",
        "lmms_scene.cli",
        "eval",
        "--model",
        "scene_blind",
        "--tasks",
        ",".join(tasks),
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "WARNING",
        *(extra or []),
    ]
    _say(f"lmms-scene demo: running {', '.join(tasks)} with the blind baseline (scene_blind) ...")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, errors="replace")
    assert proc.stdout is not None
    blank = False
    for line in proc.stdout:
        if _DEMO_NOISE.match(line):
            continue
        if not line.strip():
            if blank:
                continue
            blank = True
        else:
            blank = False
        if len(line.rstrip("\n")) > DEMO_WIDTH:
            _say(line.rstrip("\n"))
        else:
            sys.stdout.write(line)
    code = proc.wait()
    if code != 0:
        return code
    written = sorted(p for p in out.rglob("*_results.json") if p.stat().st_mtime >= started - 1)
    if not written:
        print(f"lmms-scene demo: the harness wrote no results under {out}", file=sys.stderr)
        return 1

    run_dir = written[-1].parent
    text, _ = show_text([written[-1]], width=DEMO_WIDTH)
    print(f"\n{text}\n")
    report = _report_and_submission(run_dir)
    print("")
    _say(f"lmms-scene demo: results: {written[-1]}")
    _say(f"lmms-scene demo: report:  {report}")
    _say(f"lmms-scene demo: tables:  lmms-scene show {run_dir}")
    print("")
    for line in demo_summary(written[-1]):
        _say(line)
    return 0


def demo_summary(results_file: Path) -> list[str]:
    """The demo's last five lines: what it measured, the headline numbers, what they are
    not, and the two next steps (a real model; the real data)."""
    from lmms_scene.results import load  # deferred: keeps this module's import light for the CLI's --help

    loaded = load([results_file])
    heads, sizes = [], []
    for bench in benchmarks.BENCHMARKS:
        for r in (r for r in loaded.results if r.benchmark == bench.name and r.task in bench.sample_tasks):
            computed = [
                (m.name, v)
                for m in bench.headline
                if isinstance(v := r.metrics.get(m.name), (int, float)) and not isinstance(v, bool)
            ]
            missing = [m.name for m in bench.headline if m.name not in dict(computed)]
            shown = ", ".join(f"{k} {v:.3f}" for k, v in computed[:4]) or "nothing computed"
            heads.append(
                f"{r.task}: {shown}" + (f" ({', '.join(missing)} not computed)" if missing and not computed[:1] else "")
            )
            n = (r.dataset or {}).get("n_rows")
            sizes.append(f"{r.task} ({n} rows)" if isinstance(n, int) else r.task)
    return [
        f"lmms-scene demo: measured: the blind baseline (scene_blind: text only, never an image) on {', '.join(sizes)}",
        f"lmms-scene demo: headline: {'; '.join(heads)}",
        "lmms-scene demo: these are the embedded samples: a check that everything runs, not the benchmarks (never ranked)",
        "lmms-scene demo: next, a real model: lmms-scene eval --model qwen2_5_vl --model_args pretrained=Qwen/Qwen2.5-VL-3B-Instruct "
        f"--tasks {','.join(t for b in benchmarks.built() for t in b.sample_tasks)} --output_path results/ --log_samples",
        'lmms-scene demo: next, the real data: README, "Where the data comes from today"; lmms-scene eval --tasks cooco,snus,layered_vqa '
        "names what each task still needs",
    ]


def newcomer_order(reasons: list[str]) -> list[str]:
    """A refused submission's reasons in the order a newcomer should read them: those that
    say how to vouch for the data (``--official``) first, then the other per-benchmark ones,
    then the per-task ones (the sample splits); the order within each kept."""
    names = set(benchmarks.names())

    def rank(reason: str) -> int:
        return 0 if "--official" in reason else 1 if reason.split(":", 1)[0] in names else 2

    return sorted(reasons, key=rank)


def _report_and_submission(run_dir: Path) -> Path:
    """The demo's last step: the HTML report of the run, and the leaderboard submission
    it would make, which is refused (sample splits are not the benchmarks) with its reasons."""
    info = build_report([run_dir], run_dir / "report" / "report.html", overwrite=True)
    _say(f"lmms-scene demo: wrote the HTML report {info.out} (tables as Markdown: {info.markdown})")
    target = run_dir / "submission.json"
    try:
        submission = build([run_dir])
    except Refused as refused:
        reasons = run_dir / "submission_refused.txt"
        ordered = newcomer_order(refused.reasons)
        write_atomic(reasons, "\n".join(ordered) + "\n")
        _say(f"lmms-scene demo: no leaderboard submission, as expected for sample splits ({reasons}):")
        for reason in ordered:
            print(textwrap.fill(reason, DEMO_WIDTH, initial_indent="  - ", subsequent_indent="    "))
        return info.out
    write_atomic(target, json.dumps(submission, indent=2) + "\n")
    _say(f"lmms-scene demo: submission: {target}")
    return info.out


#: lmms_eval options a rescore takes from the run itself; given again, they are refused
CARRIED = ("--tasks", "--limit", "--offset", "--repeats", "--reasoning_tags", "--seed", "--model", "--model_args")


def _given(extra: list[str], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in extra)


def rescore(run: str | Path | list, output_path: str | Path, extra: list[str] | None = None) -> int:
    """Recompute every metric of a saved run without the model: the harness replays the
    logged answers (``scene_from_samples``) through the tasks' own ``process_results`` and
    aggregations, on the same data.

    ``run`` is a run folder (its samples files and results JSON), samples files, or the
    journal of an ``lmms-scene eval`` run (:mod:`lmms_scene.journal`; a folder with a
    journal and no samples files, e.g. an interrupted run). Every option of the run that
    changes its numbers is carried over from what the run recorded (its ``--tasks``,
    ``--limit``, ``--offset``, ``--repeats``, ``--reasoning_tags``, ``--include_path``,
    seeds) and every repeat is replayed as logged; what cannot be carried over is refused
    with the reason. The metric checkpoints are the configured ones (e.g.
    ``LMMS_SCENE_CLIP_MODEL``)."""
    from lmms_scene.models.from_samples import (
        samples_files,
    )  # deferred: its models subclass lmms_eval's model class (imports the harness and torch)

    extra = list(extra or [])
    clash = [o for o in CARRIED if _given(extra, o)]
    if clash:
        raise ValueError(
            f"rescore replays the run as it was: {', '.join(clash)} come{'s' if len(clash) == 1 else ''} from the run itself "
            "and cannot be given again (a different value would not give the run's numbers)"
        )
    items = [run] if isinstance(run, (str, Path)) else list(run)
    paths = [Path(p) for p in items]
    journals = [p for p in paths if p.is_file() and p.parent.name == J.FOLDER]
    if journals or not _has_samples(paths):
        files = J.journal_files(paths)
        if not files:
            samples_files(paths)  # raises the usual "no samples files" error
        return _rescore_journal(files, Path(output_path), extra)
    return _rescore_samples(samples_files(paths), paths, Path(output_path), extra)


def _has_samples(paths: list[Path]) -> bool:
    for p in paths:
        if p.is_dir() and next(p.rglob("*_samples_*.jsonl"), None) is not None:
            return True
        if p.is_file() and "_samples_" in p.name:
            return True
    return False


def _include_path_ok(options, extra: list[str]) -> None:
    if options.include_path and not _given(extra, "--include_path"):
        for part in str(options.include_path).split(","):
            if part and not Path(part).exists():
                raise FileNotFoundError(
                    f"the run's --include_path {part} no longer exists; give --include_path, the folder with its tasks now"
                )


def _rescore_samples(files: list[Path], given: list[Path], output_path: Path, extra: list[str]) -> int:
    from lmms_scene.models.from_samples import (
        RunOptions,
        logged_repeats,
        results_file_of,
        run_options,
        task_of_samples_file,
    )  # deferred: its models subclass lmms_eval's model class (imports the harness and torch)

    options: dict[str, RunOptions] = {}
    for f in files:
        results = results_file_of(f)
        if not results.is_file():
            raise FileNotFoundError(
                f"{f}: no {results.name} beside it, so the run's --limit, --offset, --repeats and task list are "
                "unknown; rescore the folder the harness wrote (results JSON and samples files together)"
            )
        options[str(results)] = run_options(results)
    first = next(iter(options.values()))
    for opt in options.values():
        for name in RunOptions.NUMBERS:
            if getattr(opt, name) != getattr(first, name):
                raise ValueError(
                    f"the samples files come from runs with different {name} ({getattr(first, name)!r} in {first.source}, "
                    f"{getattr(opt, name)!r} in {opt.source}); rescore one run at a time"
                )
    if len(options) > 1:
        # several runs: their leaf tasks joined (no one run's --tasks string, so no group is recomputed)
        first = RunOptions(
            **{
                **asdict(first),
                "tasks": None,
                "leaf_tasks": sorted({t for o in options.values() for t in o.leaf_tasks}),
                "task_repeats": {k: v for o in options.values() for k, v in o.task_repeats.items()},
            }
        )
    tasks = [task_of_samples_file(f) for f in files]
    run_tasks = set(first.leaf_tasks)
    missing = sorted(run_tasks - set(tasks))
    if any(p.is_dir() for p in given) and missing:
        raise FileNotFoundError(
            f"the run evaluated {', '.join(missing)} but wrote no samples file for {'it' if len(missing) == 1 else 'them'} "
            f"(in {', '.join(map(str, given))}); rescore its other tasks by naming their samples files"
        )
    subset = bool(missing)
    task_arg = ",".join(tasks) if subset else None
    if subset:
        print(
            f"lmms-scene rescore: {', '.join(tasks)} of the run's {len(run_tasks)} tasks (the groups of its --tasks "
            f"{first.tasks!r} are not recomputed)"
        )
    _include_path_ok(first, extra)
    # what the samples hold of each task's repeats
    for f, task in zip(files, tasks):
        repeats = first.repeats_of(task)
        if repeats <= 1:
            continue
        held = [logged_repeats(sample, repeats, first.reasoning_active(task))[1] for _n, sample in iter_jsonl(f)]
        if not all(held):
            print(
                f"lmms-scene rescore: {task}: the samples hold the first of {repeats} answers for {held.count(False)} documents "
                "(its filter kept the first, the only one scored); that answer is replayed for each repeat"
            )
    print(f"lmms-scene rescore: replaying {', '.join(tasks)} from {', '.join(map(str, files))}")
    print(f"lmms-scene rescore: the run's options: {' '.join(first.harness_args(tasks=task_arg))}")
    code = run_harness(
        [
            "--model",
            "scene_from_samples",
            "--model_args",
            "samples=" + "|".join(map(str, files)),
            *first.harness_args(tasks=task_arg),
            "--output_path",
            str(output_path),
            "--log_samples",
            *extra,
        ],
        journal=False,
    )
    return code or _check_repeats(output_path, first, tasks)


def _check_repeats(output_path: Path, options, tasks: list[str]) -> int:
    """After a replay: each task ran with the run's repeats (1 and a message if not)."""
    written = sorted(Path(output_path).rglob("*_results.json"), key=lambda p: p.stat().st_mtime)
    if not written:
        return 0
    configs = json.loads(written[-1].read_text(encoding="utf-8")).get("configs", {})
    wrong = [
        f"{t}: {configs[t].get('repeats')} (the run: {options.repeats_of(t)})"
        for t in tasks
        if t in configs and int(configs[t].get("repeats") or 1) != options.repeats_of(t)
    ]
    if wrong:
        print(
            f"lmms-scene rescore: the replay ran with other repeats than the run: {'; '.join(wrong)}", file=sys.stderr
        )
        return 1
    return 0


def _rescore_journal(files: list[Path], output_path: Path, extra: list[str]) -> int:
    from lmms_scene.models.from_samples import (
        RunOptions,
    )  # deferred: its models subclass lmms_eval's model class (imports the harness and torch)

    run = J.read(files)
    for problem in [*run.problems, *J.unverified_notes(run)]:
        print(f"lmms-scene rescore: {problem}", file=sys.stderr)
    h = run.header
    if not run.tasks:
        raise ValueError(
            f"{', '.join(map(str, files))}: the run stopped before the model was asked anything ({run.status()}); nothing to score"
        )
    replayable = set(J.GENERATION_TYPES)
    for task, info in run.tasks.items():
        if not set(info["request_types"]) <= replayable:
            raise ValueError(f"{task}: its requests are {info['request_types']}; a journal replays generations only")
    options = RunOptions(
        source=str(files[0]),
        tasks=h.get("tasks"),
        leaf_tasks=sorted(run.tasks),
        limit=h.get("limit"),
        offset=int(h.get("offset") or 0),
        repeats=h.get("repeats"),
        task_repeats={t: int(i["repeats"]) for t, i in run.tasks.items()},
        reasoning_tags=h.get("reasoning_tags"),
        include_path=h.get("include_path"),
        seed=h.get("seed"),
        model=h.get("model"),
        model_args=h.get("model_args"),
    )
    _include_path_ok(options, extra)
    plan = J.replay_plan(run, options.offset)
    complete, partial, none = plan.complete, plan.partial, plan.none
    status = run.status()
    print(
        f"lmms-scene rescore: journal {', '.join(map(str, files))} ({status}; {sum(len(v) for v in run.outputs.values())} outputs)"
    )
    for task in complete:
        print(f"lmms-scene rescore: {task}: all {len(run.tasks[task]['doc_ids'])} documents generated")
    for task, (prefix, total, beyond) in partial.items():
        lost = f"; {beyond} generated after a gap are left out" if beyond else ""
        print(
            f"lmms-scene rescore: {task}: the first {prefix} of {total} documents generated; scored over those (--limit {prefix}){lost}"
        )
    for task in none:
        print(f"lmms-scene rescore: {task}: nothing generated before the run stopped; not scored")
    model = ["--model", "scene_from_samples", "--model_args", "journal=" + "|".join(map(str, files))]
    groups: list[tuple[Path, list[str]]] = []
    if complete and not partial and not none:
        groups.append((output_path, options.harness_args()))
    else:
        if complete:
            groups.append((output_path / "complete", options.harness_args(tasks=",".join(complete))))
        for task, (prefix, _total, _beyond) in partial.items():
            groups.append((output_path / f"partial_{task}", options.harness_args(tasks=task, limit=prefix)))
    if not groups:
        raise ValueError(
            f"{', '.join(map(str, files))}: no document of any task was generated completely; nothing to score"
        )
    code = 0
    for out, args in groups:
        print(f"lmms-scene rescore: scoring into {out}: {' '.join(args)}")
        tasks = args[args.index("--tasks") + 1].split(",")
        done = run_harness([*model, *args, "--output_path", str(out), "--log_samples", *extra], journal=False)
        code = code or done or _check_repeats(out, options, [t for t in tasks if t in run.tasks])
    return code
