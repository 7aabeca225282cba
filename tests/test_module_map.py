"""Every module of lmms_scene/ is imported by name by at least one test file, and
docs/architecture.md's "Modules and their tests" table is the one this file generates.

A test file imports a module directly when it has ``import lmms_scene.x.y``, ``from
lmms_scene.x import y`` (y a module), ``from lmms_scene.x.y import ...`` or
``importlib.import_module("lmms_scene.x.y")``. The few modules no test can import by
name (they run or launch something when imported) are in :data:`NOT_IMPORTABLE`, each
with the test that runs them.

After adding a module or a test: ``python tests/test_module_map.py --write`` rewrites the
table."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- module-tests: begin (python tests/test_module_map.py --write) -->", "<!-- module-tests: end -->"

#: module -> why no test imports it by name, and which test runs it
NOT_IMPORTABLE = {
    "lmms_scene.cli.__main__": "exits with the command's status when imported; `python -m lmms_scene.cli` runs it "
    "(the demo run of tests/conftest.py)",
    "lmms_scene.evaluate_modules.cesg.app": "launches a Gradio widget when imported (a Hugging Face Space's entry)",
    "lmms_scene.evaluate_modules.cooco_naming_accuracy.app": "launches a Gradio widget when imported",
    "lmms_scene.evaluate_modules.refclipscore.app": "launches a Gradio widget when imported",
    "lmms_scene.evaluate_modules.cesg.cesg": "loaded by `evaluate.load(folder)`, as users load it "
    "(tests/test_evaluate_modules.py)",
    "lmms_scene.evaluate_modules.cooco_naming_accuracy.cooco_naming_accuracy": "loaded by `evaluate.load(folder)` "
    "(tests/test_evaluate_modules.py)",
    "lmms_scene.evaluate_modules.refclipscore.refclipscore": "loaded by `evaluate.load(folder)` "
    "(tests/test_evaluate_modules.py)",
}


def library_modules() -> dict[str, Path]:
    """Dotted name -> file of every module under lmms_scene/ (the task folders' scripts,
    ``lmms_scene.tasks``, are the harness's and are tested through it)."""
    out = {}
    for path in sorted((REPO / "lmms_scene").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if not name.startswith("lmms_scene.tasks"):
            out[name] = path
    return out


def direct_importers(modules) -> dict[str, set[str]]:
    """Module -> the test files (names) that import it by name."""
    found: dict[str, set[str]] = {}
    for test in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(test.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            for name in names:
                if name in modules:
                    found.setdefault(name, set()).add(str(test.relative_to(REPO)))
    return found


def table() -> str:
    modules = library_modules()
    importers = direct_importers(modules)
    lines = [BEGIN, "", "| module | tests that import it by name |", "|---|---|"]
    for name, path in modules.items():
        tests = sorted(importers.get(name, ()))
        if tests:
            shown = ", ".join(f"`{t}`" for t in tests[:4]) + (f" and {len(tests) - 4} more" if len(tests) > 4 else "")
        else:
            shown = f"none: {NOT_IMPORTABLE.get(name, 'MISSING')}"
        lines.append(f"| `{path.relative_to(REPO)}` | {shown} |")
    return "\n".join([*lines, "", END])


def test_every_module_is_imported_by_a_test():
    modules = library_modules()
    importers = direct_importers(modules)
    missing = sorted(set(modules) - set(importers) - set(NOT_IMPORTABLE))
    assert not missing, (
        f"no test file imports these modules by name: {missing}; add a test that imports each and asserts "
        f"something it does (tests/test_modules_direct.py holds the small ones)"
    )
    stale = sorted(name for name in NOT_IMPORTABLE if name not in modules or name in importers)
    assert not stale, f"NOT_IMPORTABLE lists modules that are gone or now imported by a test: {stale}"


def test_the_rule_sees_a_module_no_test_imports(tmp_path, monkeypatch):
    """The check itself: a module only a comment names, or that a test reaches through its
    package's re-exports, is not imported by name."""
    fake = tmp_path / "repo"
    (fake / "lmms_scene" / "pkg").mkdir(parents=True)
    (fake / "tests").mkdir()
    for name in ("__init__.py", "pkg/__init__.py", "pkg/used.py", "pkg/loaded.py", "pkg/orphan.py"):
        (fake / "lmms_scene" / name).write_text("")
    (fake / "tests" / "test_a.py").write_text(
        "import importlib\nfrom lmms_scene.pkg import used\n# lmms_scene.pkg.orphan\n"
        "m = importlib.import_module('lmms_scene.pkg.loaded')\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", fake)
    modules = library_modules()
    made = {"lmms_scene", "lmms_scene.pkg", "lmms_scene.pkg.used", "lmms_scene.pkg.loaded", "lmms_scene.pkg.orphan"}
    assert set(modules) == made
    assert set(direct_importers(modules)) == {"lmms_scene.pkg", "lmms_scene.pkg.used", "lmms_scene.pkg.loaded"}


def test_architecture_doc_maps_modules_to_their_tests():
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"docs/architecture.md has no generated table ({BEGIN})"
    current = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert current == table(), (
        "docs/architecture.md's module-to-tests table is stale: python tests/test_module_map.py --write"
    )


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + table() + text[text.index(END) + len(END) :]
    else:
        raise SystemExit(f"docs/architecture.md: put the two markers where the table goes:\n{BEGIN}\n{END}")
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote the module-to-tests table into {DOC.relative_to(REPO)}")
