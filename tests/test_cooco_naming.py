"""COOCO naming metrics: normalisation, per-row scoring of awkward outputs, aggregation
keyed by ids."""

from __future__ import annotations

import random

import pytest
from PIL import Image

from lmms_scene.data.cooco.schema import NAMING_CONDITIONS
from lmms_scene.metrics.cooco import scoring


def cooco_view(**reports_by_model):
    """What ``show`` and the HTML report render: cooco_tables.view over one result per
    report, each model's results labelled as ``show`` labels them."""
    from pathlib import Path

    from lmms_scene.metrics.cooco import tables as cooco_tables
    from lmms_scene.results import TaskResult, label_runs

    results = [
        TaskResult(
            task=f"cooco_{k}",
            benchmark="cooco",
            metrics={scoring.BREAKDOWN_KEY: rep},
            config={},
            model="m",
            model_args=f"pretrained=org/{m}",
            source=Path("."),
        )
        for m, reps in reports_by_model.items()
        for k, rep in enumerate(reps)
    ]
    labels, _ = label_runs(results)
    return cooco_tables.view(results, labels)


def table(view, title):
    """The view's one table whose title starts with ``title``."""
    (found,) = [t for t in view.tables if t.title.startswith(title)]
    return found


def row(tab, first):
    """A table's row (display text of every cell) whose first cell is ``first``."""
    (found,) = [r for r in tab.cells() if r[0] == first]
    return found


@pytest.fixture(autouse=True)
def _tiny_clip_env(tiny_clip, monkeypatch):
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", str(tiny_clip))


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("  A Laptop.<|im_end|>", "laptop"),
        ("an orange", "orange"),
        ("Answer", "answer"),  # "an" only as a word
        ("ham.", "ham"),
        ("<|im_start|>", "<|im_start|>"),  # only end-of-turn markers are dropped
        ("Notebook</s>", "notebook"),
        # the answer ends at the first end-of-turn marker; what follows is not kept
        ("laptop<|im_end|>assistant: mug", "laptop"),
        ("cup</s>\nkitchen", "cup"),
        ("Stop sign<|eot_id|>", "stop sign"),
        ("fork<end_of_turn>\nmodel", "fork"),
        ("[/INST] Laptop</s>", "laptop"),  # a turn-opening marker is dropped, not cut at
        # every full stop is dropped, not only those at the edges
        ("a t.v.", "tv"),
        ("Laptop. Mug.", "laptop mug"),
        ("...ham...", "ham"),
        ("Potted   plant \n", "potted plant"),
        ("", ""),
        (None, ""),
        ("ＬＡＰＴＯＰ", "laptop"),  # NFKC folds full-width letters
        ("ノートパソコン", "ノートパソコン"),
    ],
)
def test_normalise_output(raw, expected):
    assert scoring.normalise_output(raw) == expected


def test_long_form_and_label():
    assert scoring.long_form("laptop") == "A photo depicts a laptop"
    assert scoring.long_form("oven") == "A photo depicts an oven"
    assert scoring.normalise_label("potted_plant") == "potted plant"


def test_levenshtein_similarity_is_rapidfuzz_ratio():
    assert scoring.levenshtein_similarity("laptop", "laptop") == 1.0
    assert scoring.levenshtein_similarity("laptops", "laptop") == pytest.approx(12 / 13)
    assert scoring.levenshtein_similarity("", "laptop") == 0.0


def item(output, condition="low", **kw):
    base = {
        "image_id": f"img_{condition}",
        "condition": condition,
        "noise_area": "none",
        "noise_level": 0.0,
        "scene": "cubicle_office",
        "target": "laptop",
        "gold": "ham" if condition in ("high", "medium", "low") else "laptop",
        "output": output,
        "crop": Image.new("RGB", (12, 9), (200, 120, 40)),
    }
    return {**base, **kw}


def test_correct_answer_scores_accuracy_and_is_not_captured():
    row = scoring.score_rows([item("Ham.")])[0]
    assert row["prediction"] == "ham"
    assert row["accuracy"] == 1.0 and row["levenshtein_accuracy"] == 1.0
    assert row["text_similarity"] == pytest.approx(1.0, abs=1e-5)
    assert row["context_captured"] is False


def test_naming_the_original_target_is_context_capture():
    row = scoring.score_rows([item("a laptop")])[0]
    assert row["context_captured"] is True
    assert row["output_target_similarity"] == pytest.approx(1.0, abs=1e-5)
    assert row["levenshtein_accuracy"] == 0.0


def test_capture_is_undefined_on_congruent_items():
    rows = scoring.score_rows([item("laptop", condition="original"), item("", condition="same_target")])
    assert rows[0]["context_captured"] is None and rows[1]["context_captured"] is None


def test_empty_very_long_and_non_english_outputs_are_scored_and_counted():
    outputs = ["", "   .<|im_end|>", "laptop " * 3000, "ノートパソコン", "jambon", "ham"]
    rows = scoring.score_rows([item(o, image_id=f"i{k}") for k, o in enumerate(outputs)])
    assert [r["empty"] for r in rows] == [True, True, False, False, False, False]
    for r in rows[:2]:
        assert r["accuracy"] == r["refclipscore"] == r["levenshtein_accuracy"] == 0.0
        assert r["output_scene_similarity"] is None and r["context_captured"] is False
        # similarities are not computed for an empty answer: None, not 0
        assert r["text_similarity"] is None and r["reference_similarity"] is None and r["clip_score"] is None
    for r in rows[2:]:
        assert 0.0 <= r["refclipscore"] <= 2.5 and -1.0 <= r["output_scene_similarity"] <= 1.0
    assert rows[2]["output_words"] == 3000 and rows[3]["non_ascii"] is True
    report = scoring.breakdown(rows)
    stats = report["output_statistics"]
    assert stats["n"] == 6 and stats["n_empty"] == 2 and stats["empty_output_rate"] == pytest.approx(2 / 6)
    assert stats["n_verbose"] == 1 and stats["n_non_ascii"] == 1
    # empties are counted as wrong, not dropped: the mean is over all six rows ...
    assert rows[5]["accuracy"] == 1.0
    answered = [r["accuracy"] for r in rows[2:]]
    assert report["overall"]["accuracy"] == pytest.approx(sum(answered) / 6)
    assert report["overall"]["accuracy"] < sum(answered) / 4
    assert report["overall"]["n"] == 6
    # ... while the similarity means leave them out, and count them as not computed
    assert report["overall"]["text_similarity"] == pytest.approx(sum(r["text_similarity"] for r in rows[2:]) / 4)
    assert report["overall"]["clip_score"] == pytest.approx(sum(r["clip_score"] for r in rows[2:]) / 4)
    assert report["overall"]["not_computed"]["text_similarity"] == 2


def test_unknown_condition_is_rejected_naming_the_row():
    with pytest.raises(ValueError, match="img_bogus.*unknown condition 'bogus'"):
        scoring.score_rows([item("x", condition="bogus")])


def test_clean_rows_are_reported_apart_and_never_in_a_headline_mean():
    # clean images (LMMS_SCENE_COOCO_CLEAN=include) are scored against the removed target
    rows = scoring.score_rows(
        [item("laptop", condition="clean", gold="laptop"), item("ham"), item("laptop", image_id="x")]
    )
    assert rows[0]["accuracy"] == 1.0 and rows[0]["context_captured"] is None
    entries = [scoring.metric_entries(r) for r in rows]
    # the headline accuracy is over the two naming items only (1 and 0), not 2 of 3
    assert scoring.mean_score([e["accuracy"] for e in entries]) == pytest.approx(0.5)
    assert "score" not in entries[0]["accuracy"]
    report = scoring.report([e["cooco_breakdown"] for e in entries])
    assert report["overall"]["n"] == 2 and report["by_condition"]["clean"]["n"] == 1
    assert report["by_condition"]["clean"]["accuracy"] == 1.0
    fig3 = table(cooco_view(m=[report]), "COOCO Figure 3: accuracy")
    assert row(fig3, "clean") == ["clean", "1.000 (n=1)"]
    assert "| clean | 1.000 (n=1) |" in fig3.text()
    # a report without clean rows keeps the paper's five conditions
    plain = scoring.report([entries[1]["cooco_breakdown"]])
    fig3 = table(cooco_view(m=[plain]), "COOCO Figure 3: accuracy")
    assert [r[0] for r in fig3.rows] == list(NAMING_CONDITIONS) and "clean" not in fig3.text()


def fake_row(image_id, condition, area, level, **scores):
    row = {
        "image_id": image_id,
        "condition": condition,
        "noise_area": area,
        "noise_level": level,
        "empty": False,
        "output_words": 1,
        "non_ascii": False,
        "clip_model": "tiny",
        "refclipscore": 0.5,
        "accuracy": 1.0,
        "levenshtein_accuracy": 1.0,
        "output_scene_similarity": 0.3,
        "context_captured": None if condition in ("original", "same_target") else False,
    }
    row.update(scores)
    return row


def test_breakdown_is_keyed_by_ids_not_positions():
    rows = [
        fake_row("a", "original", "none", 0.0, accuracy=1.0),
        fake_row("b", "low", "none", 0.0, accuracy=0.0, context_captured=True),
        fake_row("c", "low", "none", 0.0, accuracy=1.0, context_captured=False),
        fake_row("a", "original", "target", 0.5, accuracy=0.0),
        fake_row("a", "original", "target", 1.0, accuracy=0.0),
        fake_row("b", "low", "context", 1.0, accuracy=1.0, context_captured=True),
    ]
    expected = scoring.breakdown(rows)
    shuffled = rows[::-1] + rows[:2]  # out of order, with duplicates (multi-process gathers)
    random.Random(0).shuffle(shuffled)
    got = scoring.breakdown(shuffled)
    # the duplicates are dropped, and said to be
    assert expected["n_duplicate_rows_dropped"] == 0 and got["n_duplicate_rows_dropped"] == 2
    assert {**got, "n_duplicate_rows_dropped": 0} == expected
    cells = expected["by_condition_noise"]
    assert set(cells) == {"original", "low"}
    assert set(cells["original"]) == {"none", "target"} and set(cells["original"]["target"]) == {"0.5", "1"}
    assert cells["low"]["none"]["0"]["accuracy"] == 0.5 and cells["low"]["none"]["0"]["n"] == 2
    assert cells["low"]["none"]["0"]["context_capture_rate"] == 0.5
    assert "context_capture_rate" not in cells["original"]["none"]["0"]
    assert expected["context_capture_rate"] == pytest.approx(2 / 3)
    assert expected["n_rows"] == 6


def test_metric_entries_and_mean_score():
    rows = [fake_row("a", "original", "none", 0.0), fake_row("b", "low", "none", 0.0, context_captured=True)]
    entries = [scoring.metric_entries(r) for r in rows]
    assert "score" not in entries[0]["context_capture_rate"]  # congruent: no value
    assert entries[1]["context_capture_rate"]["score"] == 1.0
    assert entries[0][scoring.BREAKDOWN_KEY] == rows[0]
    capture = [e["context_capture_rate"] for e in entries]
    assert scoring.mean_score(capture + capture) == 1.0  # duplicates do not count twice
    assert scoring.mean_score([e["accuracy"] for e in entries]) == 1.0
    assert scoring.mean_score([]) is None


def test_report_names_its_scorer_and_checkpoint():
    report = scoring.report([fake_row("a", "original", "none", 0.0)])
    scorer = report["scorer"]
    assert scorer["scorer"] == "cooco_naming" and scorer["clip_model"] == "tiny" == scorer["checkpoint"]
    assert scorer["device"] in ("cpu", "cuda")
    assert set(scorer["versions"]) == {"lmms-scene", "transformers", "torch", "rapidfuzz"}
    assert all(scorer["versions"].values()), scorer["versions"]
    assert report["clip_models"] == ["tiny"] and report["n_rows"] == 1


def test_report_records_the_thresholds_scoring_applied(monkeypatch):
    # the record reads the thresholds in force, so it cannot drift from what was applied
    row = scoring.score_rows([item("laptop", condition="original")])[0]
    assert row["text_similarity"] == pytest.approx(1.0, abs=1e-5) and row["accuracy"] == 1.0
    monkeypatch.setattr(scoring, "ACCURACY_THRESHOLD", 1.5)
    monkeypatch.setattr(scoring, "LEVENSHTEIN_THRESHOLD", 1.01)
    strict = scoring.score_rows([item("laptop", condition="original")])[0]
    assert strict["accuracy"] == 0.0 and strict["levenshtein_accuracy"] == 0.0
    scorer = scoring.report([strict])["scorer"]
    assert scorer["thresholds"]["accuracy_text_cosine"] == 1.5 == scorer["accuracy_threshold"]
    assert scorer["thresholds"]["levenshtein_similarity"] == 1.01 == scorer["levenshtein_threshold"]


def test_figure_tables_merge_level0_and_noise_reports():
    level0 = scoring.breakdown([fake_row("a", "original", "none", 0.0, refclipscore=0.8)])
    noise = scoring.breakdown([fake_row("a", "original", "target", 1.0, refclipscore=0.2, accuracy=0.0)])
    view = cooco_view(m1=[level0, noise], m2=[noise])
    fig3 = table(view, "COOCO Figure 3: RefCLIPScore")
    assert fig3.header == ["condition", "m1", "m2"]
    assert row(fig3, "original") == ["original", "0.800 (n=1)", ""]
    assert "| original | 0.800 (n=1) |  |" in fig3.text()
    fig4 = table(view, "COOCO Figure 4: RefCLIPScore by relatedness x noise area x level (m1;")
    assert fig4.header[:3] == ["condition", "no noise", "context 0.5"]
    assert "| original | 0.800 (n=1) |  |  |  | 0.200 (n=1) |  |  |" in fig4.text()
    fig4b = table(view, "COOCO Figure 4: accuracy (CLIP text cosine >= 0.9) by relatedness x noise area x level (m1;")
    assert row(fig4b, "original") == ["original", "1.000 (n=1)", "", "", "", "0.000 (n=1)", "", ""]


def test_figure_cells_carry_an_interval_over_images():
    rows = [fake_row(f"i{k}", "low", "none", 0.0, refclipscore=v) for k, v in enumerate([0.1, 0.9, 0.5, 0.7])]
    report = scoring.breakdown(rows)
    cell = scoring.merge_reports([report])["low"]["none"]["0"]
    lo, hi = cell["ci95"]["refclipscore"]
    assert 0.1 <= lo < cell["refclipscore"] < hi <= 0.9
    fig3 = table(cooco_view(m=[report]), "COOCO Figure 3: RefCLIPScore")
    assert row(fig3, "low") == ["low", f"0.550 [{lo:.3f}, {hi:.3f}] (n=4)"]
    assert f"| low | 0.550 [{lo:.3f}, {hi:.3f}] (n=4) |" in fig3.text()


def test_duplicate_rows_with_different_outputs_are_an_error():
    same = [fake_row("a", "low", "none", 0.0, output="ham"), fake_row("a", "low", "none", 0.0, output="ham")]
    assert scoring.breakdown(same)["n_duplicate_rows_dropped"] == 1
    clash = [fake_row("a", "low", "none", 0.0, output="ham"), fake_row("a", "low", "none", 0.0, output="laptop")]
    with pytest.raises(scoring.DuplicateRowError, match="'a'.*'ham'.*'laptop'"):
        scoring.breakdown(clash)


def test_capture_among_wrong_answers_is_reported_apart():
    rows = [
        # accurate and captured at once (possible in ``high``: replacement close to the target)
        fake_row("a", "high", "none", 0.0, accuracy=1.0, context_captured=True),
        fake_row("b", "high", "none", 0.0, accuracy=0.0, context_captured=True),
        fake_row("c", "low", "none", 0.0, accuracy=0.0, context_captured=False),
        fake_row("d", "low", "none", 0.0, accuracy=1.0, context_captured=False),
        fake_row("e", "original", "none", 0.0, accuracy=0.0),
    ]
    report = scoring.breakdown(rows)
    assert report["context_capture_rate"] == pytest.approx(2 / 4)
    assert report["context_capture_rate_among_wrong"] == pytest.approx(1 / 2)


def test_report_with_several_clip_models_names_none_of_them(monkeypatch):
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", "env-clip")
    rows = [
        fake_row("a", "original", "none", 0.0, clip_model="clip-1"),
        fake_row("b", "original", "none", 0.0, clip_model="clip-2"),
    ]
    report = scoring.report(rows)
    assert report["scorer"]["clip_model"] == "mixed"
    assert report["scorer"]["clip_models"] == ["clip-1", "clip-2"] == report["clip_models"]
    assert "env-clip" not in str(report["scorer"])


def test_show_tables_for_noise_runs_print_figure_4(tmp_path):
    from lmms_scene.results import TaskResult

    rows = [
        fake_row(f"i{k}", c, a, lv, refclipscore=0.1 * k)
        for k, (c, a, lv) in enumerate(
            [("original", "none", 0.0), ("original", "target", 0.5), ("low", "context", 1.0), ("low", "all", 0.5)]
        )
    ]
    result = TaskResult(
        task="cooco_noise",
        benchmark="cooco",
        metrics={scoring.BREAKDOWN_KEY: scoring.report(rows)},
        config={},
        model="m",
        model_args="pretrained=org/my-vlm",
        source=tmp_path,
    )
    from lmms_scene.metrics.cooco import tables as cooco_tables
    from lmms_scene.results import label_runs

    view = cooco_tables.view([result], label_runs([result])[0])
    text = view.text()
    assert "## COOCO Figure 3: RefCLIPScore at noise level 0" in text and "| condition | my-vlm |" in text
    assert "## COOCO Figure 4: RefCLIPScore by relatedness x noise area x level (my-vlm;" in text
    assert "| low |  |  | 0.200 (n=1) |" in text  # low, context 1.0
    fig4 = table(view, "COOCO Figure 4: RefCLIPScore")
    assert row(fig4, "low")[:4] == ["low", "", "", "0.200 (n=1)"]
    assert not any("not computed" in n for n in view.notes) and "not computed" not in text
