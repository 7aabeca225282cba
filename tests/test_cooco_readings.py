"""COOCO's two readings (issue 30), unit by unit: parentheticals stripped from golds by
default, the authors' text handling and row selection on request, the median RefCLIPScore
in every cell and in ``show`` (Figure 3 as the paper draws it), float64 boxes, and the
setting that chooses the reading. The whole pipeline against an independent
re-implementation of the authors' code is tests/test_cooco_parity.py."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from PIL import Image
from test_cooco_naming import cooco_view, fake_row, row, table

from lmms_scene import imaging, settings
from lmms_scene.data import cooco
from lmms_scene.metrics.cooco import scoring


def item(output: str, gold: str = "bat (sports)", reading: str = "cleaned", **extra) -> dict:
    return {
        "image_id": "000000397133_kitchen_bottle_bat_(sports)_relscore_low",
        "condition": "low",
        "noise_area": "none",
        "noise_level": 0.0,
        "scene": "kitchen",
        "target": "bottle",
        "gold": gold,
        "output": output,
        "crop": Image.new("RGB", (8, 8), (10, 200, 30)),
        "reading": reading,
        **extra,
    }


@pytest.mark.parametrize(
    "label, name",
    [
        ("bat (sports)", "bat"),
        ("mouse (computer)", "mouse"),
        ("cabinet (kitchen)", "cabinet"),
        ("stop sign", "stop sign"),
    ],
)
def test_gold_name_drops_the_parenthetical(label, name):
    assert scoring.gold_name(label) == name


def test_bat_is_a_correct_name_for_bat_sports_without_clip():
    with settings.override(clip_model="none"):
        (bat, spelled, wrong) = scoring.score_rows([item("Bat."), item("bat (sports)"), item("cup")])
    assert bat["gold"] == "bat (sports)" and bat["gold_name"] == "bat" and bat["reading"] == "cleaned"
    assert bat["levenshtein_similarity"] == 1.0 and bat["levenshtein_accuracy"] == 1.0
    # the parenthetical a model never says now costs the full label its exact match
    assert spelled["levenshtein_similarity"] < 1.0
    assert wrong["levenshtein_accuracy"] == 0.0


def test_bat_is_a_correct_name_for_bat_sports_with_clip(tiny_clip):
    with settings.override(clip_model=str(tiny_clip)):
        (bat,) = scoring.score_rows([item("bat")])
        (theirs,) = scoring.score_rows([item("bat", reading="authors", gold_spelling="bat (sports)")])
    assert bat["text_similarity"] == pytest.approx(1.0, abs=1e-6) and bat["accuracy"] == 1.0
    # the authors give CLIP the full label: the same answer is no exact match there
    assert theirs["text_similarity"] < 1.0 - 1e-6 and theirs["levenshtein_accuracy"] == 1.0


@pytest.mark.parametrize(
    "raw, ours, theirs, hard",
    [
        ("  A Cup.<|im_end|>", "cup", "cup.<|im_end|>", "cup"),
        ("an orange", "orange", "orange", "orange"),
        ("An ", "an", "", ""),  # only an article: empty for them, "an" for us
        ("Laptop\n", "laptop", "laptop\n", "laptop\n"),
    ],
)
def test_the_authors_text_handling(raw, ours, theirs, hard):
    assert scoring.normalise_output(raw) == ours
    assert scoring.authors_output(raw) == theirs
    assert scoring.authors_hard_text(theirs) == hard


def test_the_authors_long_form_keeps_their_spelling():
    assert scoring.authors_long_form("baseball ") == "A photo depicts a baseball "
    assert scoring.authors_long_form("orange.<|im_end|>") == "A photo depicts an orange.<|im_end|>"
    assert scoring.long_form("baseball ") == "A photo depicts a baseball"
    assert scoring.authors_hard_gold("Bat (sports)") == "bat"


def test_the_authors_reading_drops_empty_and_over_77_token_answers_and_counts_them(tiny_clip):
    long_answer = "a wooden object with legs " * 6
    answers = ["", "a ", long_answer, "bat", "the bat of a player"]
    with settings.override(clip_model=str(tiny_clip)):
        rows = scoring.score_rows(
            [item(o, reading="authors", gold_spelling="bat (sports)", image_id=f"i{k}") for k, o in enumerate(answers)]
        )
    assert [r["dropped"] for r in rows] == ["empty", "empty", "over_77_clip_tokens", None, None]
    assert all(r["refclipscore"] is None and r["levenshtein_accuracy"] is None for r in rows[:3])
    kept, summary = scoring.reading_rows(rows)
    assert summary == {
        "reading": "authors",
        "dropped_empty": 2,
        "dropped_over_77_clip_tokens": 1,
        "levenshtein_left_out_longer_than_longest_gold": 1,
        "longest_gold_chars": 3,
    }
    assert len(kept) == 2
    cell = scoring.overall_cell(rows)
    assert cell["n"] == 2 and cell["levenshtein_accuracy"] == 1.0  # "bat" only: the long answer is left out
    entries = [scoring.metric_entries(r)["levenshtein_accuracy"] for r in rows]
    assert scoring.mean_score(entries) == 1.0
    # the default reading keeps all five: two empty answers scored 0, the long one cut to 77 tokens
    with settings.override(clip_model=str(tiny_clip)):
        cleaned = scoring.score_rows([item(o, image_id=f"i{k}") for k, o in enumerate(answers)])
    assert [r["empty"] for r in cleaned] == [True, False, False, False, False]  # "a" alone is an answer for us
    assert scoring.overall_cell(cleaned)["n"] == 5


def test_the_authors_crop_goes_through_a_jpeg_at_quality_75():
    rng = np.random.default_rng(0)
    crop = Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8))
    import io

    buffer = io.BytesIO()
    crop.save(buffer, format="JPEG")  # PIL's default quality is 75
    expected = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    got = np.asarray(scoring.jpeg_round_trip(crop))
    assert np.array_equal(got, expected) and not np.array_equal(got, np.asarray(crop))


def test_every_cell_holds_the_median_refclipscore_with_an_interval():
    values = {"a": 0.1, "b": 0.2, "c": 0.9, "d": 0.4}
    rows = [fake_row(k, "original", "none", 0.0, refclipscore=v) for k, v in values.items()]
    rows.append(fake_row("e", "original", "none", 0.0, refclipscore=None))
    report = scoring.breakdown(rows)
    cell = report["by_condition_noise"]["original"]["none"]["0"]
    assert cell["refclipscore_median"] == pytest.approx(statistics.median(values.values())) == 0.3
    assert cell["refclipscore"] == pytest.approx(0.4) != pytest.approx(cell["refclipscore_median"])
    low, high = cell["ci95"]["refclipscore_median"]
    assert 0.1 <= low <= 0.3 <= high <= 0.9
    assert report["overall"]["refclipscore_median"] == pytest.approx(0.3)


def test_show_draws_figure_3_as_the_paper_does_with_medians():
    rows = [
        fake_row(k, c, "none", 0.0, refclipscore=v)
        for c in ("original", "low")
        for k, v in zip("abc", (0.2, 0.6, 0.7 if c == "original" else 0.3))
    ]
    view = cooco_view(m=[scoring.breakdown(rows)])
    fig3 = table(view, "COOCO Figure 3: median RefCLIPScore at noise level 0")
    assert row(fig3, "original")[1].startswith("0.600") and row(fig3, "low")[1].startswith("0.300")
    assert any("median RefCLIPScore" in p.title for p in view.plots)
    # Figure 4 draws means only (as the paper's does)
    assert not any(t.title.startswith("COOCO Figure 4: median") for t in view.tables)
    # results written before the median existed say so instead of an empty table
    old = scoring.breakdown(rows)
    for cell in [old["overall"], *old["by_condition"].values()] + [
        lv for a in old["by_condition_noise"].values() for lvs in a.values() for lv in lvs.values()
    ]:
        cell.pop("refclipscore_median", None)
    notes = " ".join(cooco_view(m=[old]).notes)
    assert "median RefCLIPScore: not in these results" in notes
    # with CLIP off there is no RefCLIPScore at all: the usual "not computed" note
    off = scoring.breakdown([fake_row(k, "original", "none", 0.0, refclipscore=None) for k in "ab"])
    notes = " ".join(cooco_view(m=[off]).notes)
    assert (
        "not in these results" not in notes and "median RefCLIPScore and RefCLIPScore: not computed" in notes
    )  # one note names both


def test_the_authors_reading_without_clip_says_the_77_token_check_was_not_done():
    with settings.override(clip_model="none"):
        rows = scoring.score_rows([item("bat " * 40, reading="authors", gold_spelling="bat (sports)")])
    assert rows[0]["dropped"] is None and rows[0]["levenshtein_similarity"] is not None
    _, summary = scoring.reading_rows(rows)
    assert "CLIP switched off" in summary["over_77_clip_tokens_not_checked"]


def test_the_reading_is_one_setting_checked_before_the_model_runs(monkeypatch):
    assert settings.current().cooco_reading == "cleaned"
    monkeypatch.setenv(settings.COOCO_READING_ENV, "authors")
    assert settings.current().cooco_reading == "authors"
    assert cooco.reading_option("Authors") == "authors" and cooco.reading_option("") == "cleaned"
    with pytest.raises(ValueError, match="LMMS_SCENE_COOCO_READING='paper'"):
        cooco.reading_option("paper")
    with pytest.raises(ValueError, match="skips clean images"):
        cooco.reading_option("authors", include_clean=True)
    from lmms_scene.tasks.cooco import utils

    monkeypatch.setenv(settings.COOCO_CLEAN_ENV, "include")
    with pytest.raises(ValueError, match="skips clean images"):
        utils.process_docs(None)


def test_boxes_stay_float64_where_float32_would_move_a_crop_edge():
    # a COCO box of the fixture (tiny_coco instances): x + w rounds one way in float64
    # and the other in float32, so PIL's crop (and Qwen's prompt) moved by one pixel
    box = (364.21, 86.57, 31.29, 23.67)
    as32 = [float(np.float32(v)) for v in box]
    assert imaging.crop_pixels(box, (640, 640))[2] != imaging.crop_pixels(as32, (640, 640))[2]
    feature = cooco.features()["target_bbox"]
    assert feature.feature.dtype == "float64"
