"""SNUS's and Layered-VQA's sample numbers are pinned, as COOCO's are
(tests/test_cooco_numbers.py): a fixed mix of outputs scored through the tasks' own
``process_results`` and aggregations gives, to 1e-6, the values in tests/golden/
(tests/golden/make_sample_golden.py says how they were made and when to remake them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import clear_cache_keeping_models

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))

from make_sample_golden import COMPUTE, SKIP, strip  # noqa: E402
from pin import compare  # noqa: E402

pytestmark = pytest.mark.slow

#: a headline key per pin that must hold a real number (the pin is not vacuous)
HEADLINES = {
    "snus": ("CESG", "F1_o", "bleu4", "cider"),
    "layered_vqa": ("retained_text", "retained_visual", "retained_layered", "accuracy"),
}


@pytest.mark.parametrize("bench", sorted(COMPUTE))
def test_sample_scores_equal_the_pinned_reference(bench, monkeypatch):
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", "none")
    clear_cache_keeping_models()  # every memo and CLIP encoder; the settings-free models stay loaded
    expected = json.loads((GOLDEN / f"{bench}_sample.json").read_text())
    got = strip(COMPUTE[bench]())
    problems: list[str] = []
    compare(expected, got, "", problems, frozenset(SKIP))
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:20])
    for key in HEADLINES[bench]:
        assert isinstance(expected[key], float) and expected[key] > 0, key
