"""COOCO's numbers are pinned: the sample tasks scored with the tiny CLIP give, to 1e-6,
the values the reference version computed (tests/golden/make_cooco_golden.py says how
they were made). A refactor that moves code must not move a number."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden" / "cooco_sample_tiny_clip.json"
#: what names the checkpoint (a temporary folder) rather than a number
_SKIP = {"scorer", "clip_models"}


def _compare(expected, got, path: str, problems: list[str]) -> None:
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            problems.append(f"{path}: expected a dict, got {got!r:.80}")
            return
        for key, value in expected.items():
            if key in _SKIP:
                continue
            if key not in got:
                problems.append(f"{path}/{key}: missing")
            else:
                _compare(value, got[key], f"{path}/{key}", problems)
    elif isinstance(expected, float) and not isinstance(expected, bool):
        if not (isinstance(got, (int, float)) and math.isclose(expected, got, rel_tol=0, abs_tol=1e-6)):
            problems.append(f"{path}: expected {expected!r}, got {got!r}")
    elif expected != got:
        problems.append(f"{path}: expected {expected!r}, got {got!r}")


def test_sample_scores_equal_the_pinned_reference(tiny_clip, monkeypatch):
    monkeypatch.syspath_prepend(str(GOLDEN.parent))
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", str(tiny_clip))  # compute() sets it; restored after
    from make_cooco_golden import compute

    from lmms_scene import cache

    cache.clear()
    got = compute(str(tiny_clip))
    expected = json.loads(GOLDEN.read_text())
    problems: list[str] = []
    _compare(expected, got, "", problems)
    assert not problems, "\n".join(problems[:20])
    # the pin is not vacuous: it holds every headline metric of both tasks
    for task in ("cooco_sample", "cooco_noise_sample"):
        assert {"refclipscore", "accuracy", "levenshtein_accuracy", "context_capture_rate"} <= set(expected[task])
        assert expected[task]["refclipscore"] > 0
