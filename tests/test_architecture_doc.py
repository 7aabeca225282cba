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
