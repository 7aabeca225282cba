"""The ``>>>`` examples in lmms_scene's docstrings run as tests (CI runs them too).

Examples that need the real CLIP checkpoint run only where it is in the local Hugging
Face cache; elsewhere they are skipped with that reason."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import lmms_scene

#: modules whose examples need openai/clip-vit-base-patch32
NEEDS_CLIP = {"lmms_scene.metrics.clip"}


def modules() -> list[str]:
    names = ["lmms_scene"]
    for info in pkgutil.walk_packages(lmms_scene.__path__, "lmms_scene."):
        if info.name.startswith(("lmms_scene.tasks", "lmms_scene.templates")) or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


def examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    return [t for t in doctest.DocTestFinder(exclude_empty=True).find(module) if t.examples]


def test_docstring_examples_exist():
    total = sum(len(t.examples) for name in modules() for t in examples(name))
    assert total >= 20, total


@pytest.mark.parametrize("name", [m for m in modules() if examples(m)])
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    tests = examples(name)
    if name in NEEDS_CLIP:
        from lmms_scene.metrics import clip

        if not clip.default_model_cached():
            pytest.skip(f"{name}: its examples need {clip.DEFAULT_CLIP_MODEL}, which is not in the local HF cache")
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (output above)"
