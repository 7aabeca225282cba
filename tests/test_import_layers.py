"""The import graph docs/architecture.md states ("Floors"): every module of lmms_scene (and
of the task folders, ``lmms_scene.tasks``) sits on a floor; a module never imports one of
a higher floor, no import cycle runs through top-level imports, and an import of one of
our own modules inside a function is there only to defer a heavy third-party import,
which its line says (``# deferred: ...``).

Read with ``ast`` (nothing is imported): a module's imports are its top-level ``import`` /
``from ... import`` statements (``if TYPE_CHECKING:`` and ``if __name__ == "__main__":`` blocks excluded: they never
run on import),
and importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``, so those
count as imported too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import REPO

#: bottom to top. A module's floor is, in order: the floor of its own name when listed here;
#: for a module inside ``lmms_scene.data`` or ``lmms_scene.metrics`` (a benchmark's
#: ``data/<bench>/`` or ``metrics/<bench>/``), the floor :data:`PACKAGE_FLOORS` gives its
#: package; else the floor of its longest listed prefix (a package name matches the package
#: and everything under it). A new benchmark's modules need no edit here. Keep
#: docs/architecture.md's table ("Floors") the same.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        (
            "lmms_scene",
            "lmms_scene.settings",
            "lmms_scene.cache",
            "lmms_scene.validation",
            "lmms_scene.provenance",
            "lmms_scene.files",
            "lmms_scene.progress",
            "lmms_scene.prompts",
            "lmms_scene.imaging",
            "lmms_scene.compositing",
            "lmms_scene.compat",
            "lmms_scene.compat_check",
            "lmms_scene.contract",
            "lmms_scene.verdicts",
            "lmms_scene.data",
            "lmms_scene.data.layered_vqa",
            "lmms_scene.data.layered_vqa.schedules",
        ),
    ),
    ("registry", ("lmms_scene.registration", "lmms_scene.benchmarks", "lmms_scene.harness")),
    ("services", ("lmms_scene.nlp", "lmms_scene.judges")),
    (
        "generic metrics",
        ("lmms_scene.metrics", "lmms_scene.metrics.rows", "lmms_scene.metrics.outputs", "lmms_scene.metrics.clip"),
    ),
    ("data", ()),
    ("results", ("lmms_scene.results", "lmms_scene.report", "lmms_scene.report.tables", "lmms_scene.report.plots")),
    ("benchmark metrics", ("lmms_scene.baselines", "lmms_scene.analysis", "lmms_scene.evaluate_modules")),
    (
        "reports",
        (
            "lmms_scene.report.html",
            "lmms_scene.report.text",
            "lmms_scene.report.submission",
            "lmms_scene.report.submission_file",
            "lmms_scene.report.leaderboard",
            "lmms_scene.report.publish",
        ),
    ),
    (
        "runs",
        (
            "lmms_scene.models",
            "lmms_scene.journal",
            "lmms_scene.journal_read",
            "lmms_scene.evaluate",
            "lmms_scene.preflight",
        ),
    ),
    ("tasks", ("lmms_scene.tasks",)),
    ("cli", ("lmms_scene.cli",)),
)
#: package -> the floor of every module inside it that FLOORS does not list by name: the
#: shared data modules and every benchmark's data/<bench>/ on "data", every benchmark's
#: metrics/<bench>/ (and cesg/, captioning/) on "benchmark metrics"
PACKAGE_FLOORS: dict[str, str] = {"lmms_scene.data": "data", "lmms_scene.metrics": "benchmark metrics"}
DEFERRED = re.compile(r"#\s*deferred:\s*\S")


def module_files(root: Path = REPO) -> dict[str, Path]:
    """Every module: dotted name -> file (``tasks/`` is ``lmms_scene.tasks``)."""
    out = {}
    for base, prefix in ((root / "lmms_scene", ("lmms_scene",)), (root / "tasks", ("lmms_scene", "tasks"))):
        for path in sorted(base.rglob("*.py")):
            parts = [*prefix, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def floor_of(module: str) -> int:
    levels = {name: level for level, (_, names) in enumerate(FLOORS) for name in names}
    if module in levels:
        return levels[module]
    for package, floor in PACKAGE_FLOORS.items():
        if module.startswith(package + "."):
            return [name for name, _ in FLOORS].index(floor)
    best, floor = -1, None
    for name, level in levels.items():
        if module.startswith(name + ".") and len(name) > best:
            best, floor = len(name), level
    if floor is None:
        raise AssertionError(f"{module}: on no floor; add it to FLOORS here and to docs/architecture.md ('Floors')")
    return floor


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _with_parents(name: str, modules: dict[str, Path]) -> list[str]:
    parts = name.split(".")
    return [p for k in range(1, len(parts) + 1) if (p := ".".join(parts[:k])) in modules]


def _never_on_import(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` and ``if __name__ == "__main__":`` blocks: they never run when
    the module is imported."""
    test = getattr(node, "test", None)
    if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
        return True
    return isinstance(test, ast.Compare) and getattr(test.left, "id", None) == "__name__"


def imports(
    module: str, source: str, modules: dict[str, Path]
) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """(top-level imports of our modules as (line, module); in-function ones as (line, module, the
    statement's text, all its lines: the formatter may put the comment on the closing line))."""
    tree = ast.parse(source)
    lines = source.splitlines()

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            ]
        else:
            return []
        return [r for n in names if n.split(".")[0] == "lmms_scene" and (r := _resolve(n, modules))]

    top: list[tuple[int, str]] = []

    def walk_top(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top.extend((node.lineno, t) for t in targets(node))
            elif isinstance(node, (ast.If, ast.Try)) and not _never_on_import(node):
                for part in ("body", "orelse", "finalbody"):
                    walk_top(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    walk_top(handler.body)

    walk_top(tree.body)
    inner = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                for t in targets(node):
                    inner.append((node.lineno, t, "\n".join(lines[node.lineno - 1 : node.end_lineno])))
    return top, inner


def check(root: Path = REPO) -> list[str]:
    """Every breach of the rule, one message each (empty: the graph is as the doc says)."""
    modules = module_files(root)
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        here = floor_of(module)
        top, inner = imports(module, path.read_text(encoding="utf-8"), modules)
        graph[module] = set()
        for line, target in top + [(line, target) for line, target, _ in inner]:
            for dep in _with_parents(target, modules):
                if dep == module or module.startswith(dep + "."):
                    continue
                if floor_of(dep) > here:
                    problems.append(
                        f"{path.relative_to(root)}:{line}: {module} (floor '{FLOORS[here][0]}') imports {dep} "
                        f"(floor '{FLOORS[floor_of(dep)][0]}', higher); floors bottom to top: "
                        + " < ".join(name for name, _ in FLOORS)
                    )
        for _line, target in top:
            graph[module].update(
                d for d in _with_parents(target, modules) if d != module and not module.startswith(d + ".")
            )
        for line, target, text in inner:
            if not DEFERRED.search(text):
                problems.append(
                    f"{path.relative_to(root)}:{line}: {module} imports {target} inside a function; import it at the "
                    "top, or, when it only defers a heavy third-party import, say so on the line (# deferred: <what>)"
                )
        for line, text in other_function_imports(path.read_text(encoding="utf-8")):
            problems.append(
                f"{path.relative_to(root)}:{line}: {module}: `{text.strip()}` inside a function; import it at the top, "
                "or, when it defers a heavy or optional third-party import, say so on the line (# deferred: <why>)"
            )
    problems.extend(f"import cycle: {' -> '.join(c)}" for c in cycles(graph))
    return problems


def other_function_imports(source: str) -> list[tuple[int, str]]:
    """In-function imports of anything but our own modules (the standard library, third-party
    packages) whose lines do not say why they are deferred: (line, text)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = []
    seen: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level
                    or any(n.split(".")[0] == "lmms_scene" for n in names)
                ):
                    continue  # ours: the check above
                text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                if not DEFERRED.search(text):
                    out.append((node.lineno, lines[node.lineno - 1]))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(_path(sorted(comp), graph))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def _path(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    members, start = set(comp), comp[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                return paths[v] + [start]
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return comp


@pytest.mark.slow
def test_no_module_imports_a_higher_floor_no_cycle_no_hidden_import():
    problems = check()
    assert not problems, "\n".join(problems)


def test_every_floor_is_in_the_architecture_doc_in_order():
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Floors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ([^|]+?) \|", section, flags=re.MULTILINE)
    assert [(int(n), name) for n, name in rows] == [(k, name) for k, (name, _) in enumerate(FLOORS)]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"lmms_scene/__init__.py": "", "tasks/__init__.py": "", **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_an_upward_import_is_named_with_the_floors(tmp_path):
    root = _tree(
        tmp_path, {"lmms_scene/settings.py": "from lmms_scene.cli import main\n", "lmms_scene/cli/__init__.py": ""}
    )
    (problem,) = check(root)
    assert problem.startswith(
        "lmms_scene/settings.py:1: lmms_scene.settings (floor 'core') imports lmms_scene.cli (floor 'cli', higher)"
    )
    assert "core < registry < " in problem


def test_a_cycle_and_an_unexplained_function_import_are_named(tmp_path):
    root = _tree(
        tmp_path,
        {
            "lmms_scene/cache.py": "from lmms_scene import files\n",
            "lmms_scene/files.py": "import lmms_scene.cache\n\ndef f():\n    from lmms_scene import settings\n",
            "lmms_scene/settings.py": "def g():\n    from lmms_scene import cache  # deferred: torch\n",
        },
    )
    problems = check(root)
    assert "import cycle: lmms_scene.cache -> lmms_scene.files -> lmms_scene.cache" in problems
    assert any(
        p.startswith("lmms_scene/files.py:4: lmms_scene.files imports lmms_scene.settings inside a function")
        for p in problems
    )
    assert len(problems) == 2  # settings.g says why it defers its import


def test_type_checking_imports_are_not_edges(tmp_path):
    root = _tree(
        tmp_path,
        {
            "lmms_scene/cache.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lmms_scene import files\n",
            "lmms_scene/files.py": "from lmms_scene import cache\n",
        },
    )
    assert check(root) == []


def test_a_task_module_is_on_the_tasks_floor_and_the_rest_defaults_to_core():
    assert FLOORS[floor_of("lmms_scene.tasks.x.utils")][0] == "tasks"
    assert FLOORS[floor_of("lmms_scene.data.layered_vqa.schedules")][0] == "core"
    assert FLOORS[floor_of("lmms_scene.data.layered_vqa.rounds")][0] == "data"
    assert FLOORS[floor_of("lmms_scene.nowhere")][0] == "core"  # a new top-level module: core until placed
    assert FLOORS[floor_of("lmms_scene.data")][0] == "core"
    assert FLOORS[floor_of("lmms_scene.metrics.rows")][0] == "generic metrics"


def test_a_new_benchmarks_modules_take_their_floor_from_their_package(tmp_path):
    # a fourth benchmark's data/pope/ is on "data" and its metrics/pope/ on "benchmark
    # metrics" with no edit to FLOORS: data/pope may import data/release.py, never a report
    assert FLOORS[floor_of("lmms_scene.data.pope")][0] == "data"
    assert FLOORS[floor_of("lmms_scene.data.pope.builder")][0] == "data"
    assert FLOORS[floor_of("lmms_scene.metrics.pope.tables")][0] == "benchmark metrics"
    files = {
        "lmms_scene/data/__init__.py": "",
        "lmms_scene/data/release.py": "",
        "lmms_scene/data/pope/__init__.py": "from lmms_scene.data import release\n",
        "lmms_scene/metrics/__init__.py": "",
        "lmms_scene/metrics/pope/__init__.py": "from lmms_scene.data import pope\n",
        "lmms_scene/report/__init__.py": "",
        "lmms_scene/report/html.py": "",
    }
    assert check(_tree(tmp_path, files)) == []
    (tmp_path / "lmms_scene/data/pope/views.py").write_text("from lmms_scene.report import html\n")
    problems = check(tmp_path)
    assert len(problems) == 2 and problems[1].startswith(
        "lmms_scene/data/pope/views.py:1: lmms_scene.data.pope.views (floor 'data') imports "
        "lmms_scene.report.html (floor 'reports', higher)"
    ), problems


def test_a_third_party_or_stdlib_import_inside_a_function_needs_its_reason(tmp_path):
    root = _tree(
        tmp_path,
        {
            "lmms_scene/files.py": "def f():\n    import json\n\ndef g():\n    import torch  # deferred: torch is heavy to import\n",
        },
    )
    problems = check(root)
    assert len(problems) == 1 and "files.py:2" in problems[0] and "`import json` inside a function" in problems[0], (
        problems
    )


def test_every_folder_of_modules_is_a_package_the_wheel_ships():
    """A folder of modules without ``__init__.py`` is a namespace package, which
    ``find_packages`` (setup.py) leaves out of the wheel: an installed lmms-scene would fail
    at import. (The ``evaluate`` modules' folders are loaded by path, not imported.)"""
    missing = sorted(
        str(folder.relative_to(REPO))
        for folder in {p.parent for p in (REPO / "lmms_scene").rglob("*.py") if "__pycache__" not in p.parts}
        if not (folder / "__init__.py").exists() and folder.parent.name != "evaluate_modules"
    )
    assert not missing, f"folders of modules without __init__.py (left out of the wheel): {missing}"
