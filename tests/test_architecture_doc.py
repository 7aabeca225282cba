"""docs/architecture.md stays true: every module it names exists, and every top-level
module and package of lmms_scene is on the map."""

from __future__ import annotations

import re

from conftest import REPO

DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_every_module_named_on_the_map_exists():
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_<>]+\.py)`", DOC)) | set(re.findall(r"`((?:[a-z_]+/)+)`", DOC))
    missing = []
    for path in sorted(named):
        if "<" in path:
            continue
        candidates = [REPO / "lmms_scene" / path, REPO / path]
        # a bare file name (in a row about its package) must exist somewhere in the package
        roots = (REPO / "lmms_scene", REPO / "tasks")
        found = any(c.exists() for c in candidates) or any(
            any(root.rglob(path.rstrip("/"))) for root in roots if path.count("/") <= 1
        )
        if not found:
            missing.append(path)
    assert len(named) > 20 and not missing, missing


def test_every_top_level_module_is_on_the_map():
    tops = [p.name for p in (REPO / "lmms_scene").glob("*.py") if p.name != "__init__.py"]
    packages = [p.name + "/" for p in (REPO / "lmms_scene").iterdir() if (p / "__init__.py").exists()]
    absent = [name for name in tops + packages if f"`{name}" not in DOC and f"{name.rstrip('/')}/" not in DOC]
    assert not absent, f"not described in docs/architecture.md: {absent}"


def test_the_cache_row_names_every_functools_cache():
    # "cache.py is the shared cache; besides it ..." lists every functools cache of the library
    row = next(line for line in DOC.splitlines() if line.startswith("| `cache.py` |"))
    users = sorted(
        str(p.relative_to(REPO / "lmms_scene" if "lmms_scene" in p.parts else REPO))
        for root in (REPO / "lmms_scene", REPO / "tasks")
        for p in root.rglob("*.py")
        if re.search(r"lru_cache|functools\.cache\b|from functools import cache\b", p.read_text(encoding="utf-8"))
    )
    assert users and all(f"`{u}`" in row for u in users), (users, row)


def test_the_task_utils_claim_names_the_one_with_logic_of_its_own():
    # the intro says which task utils.py only connect hooks and which holds aggregation logic
    # of its own (a private helper building aggregations, not a hook): both must hold
    intro = DOC.split("## ", 1)[0].replace("\n", " ")
    only, _, also = intro.partition("only connect")
    names = {"layered_vqa": "Layered-VQA's", "cooco": "COOCO's", "snus": "SNUS's"}
    for utils in sorted((REPO / "tasks").glob("*/utils.py")):
        logic = bool(re.search(r"^def _(retained|group_retained|report)\(", utils.read_text(encoding="utf-8"), re.M))
        name = names[utils.parent.name]
        assert (name in also and "also holds" in also) if logic else (name in only), (utils, logic)


def test_adding_a_benchmark_counts_the_toys_files_and_names_the_contract():
    from lmms_scene import contract

    section = DOC.split("## Adding a benchmark", 1)[1].split("\n## ", 1)[0]
    files = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests" / "toybench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    listed = re.findall(r"^\| `(tests/toybench/[^`]+)` \|", section, flags=re.M)
    assert sorted(listed) == files
    assert f"Its {len(files)} files" in section
    for protocol in ("DataModule", "ScoringModule", "ResultsModule", "PooledResultsModule"):
        assert hasattr(contract, protocol) and f"`{protocol}`" in DOC
