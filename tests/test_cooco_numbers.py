"""COOCO's numbers are pinned: the sample tasks scored with the tiny CLIP give, to 1e-6,
the values the reference version computed (tests/golden/make_cooco_golden.py says how
they were made). A refactor that moves code must not move a number."""

from __future__ import annotations

import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "cooco_sample_tiny_clip.json"
sys.path.insert(0, str(GOLDEN.parent))

from pin import compare  # noqa: E402

#: what names the checkpoint (a temporary folder) rather than a number
_SKIP = {"scorer", "clip_models"}


def test_sample_scores_equal_the_pinned_reference(tiny_clip, monkeypatch):
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", str(tiny_clip))  # compute() sets it; restored after
    from conftest import clear_cache_keeping_models
    from make_cooco_golden import compute

    clear_cache_keeping_models()  # COOCO uses none of the NLP models it keeps loaded
    got = compute(str(tiny_clip))
    expected = json.loads(GOLDEN.read_text())
    problems: list[str] = []
    compare(expected, got, "", problems, frozenset(_SKIP))
    assert not problems, "\n".join(problems[:20])
    # the pin is not vacuous: it holds every headline metric of both tasks
    for task in ("cooco_sample", "cooco_noise_sample"):
        assert {"refclipscore", "accuracy", "levenshtein_accuracy", "context_capture_rate"} <= set(expected[task])
        assert expected[task]["refclipscore"] > 0
