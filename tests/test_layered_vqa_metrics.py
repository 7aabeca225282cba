"""Layered-VQA grading, evidence selection, grounding and the report."""

from __future__ import annotations

import pytest

from lmms_scene.data.layered_vqa.delivery import SELECTION
from lmms_scene.data.layered_vqa.rounds import KeepRepeats, conversations, turns_of
from lmms_scene.data.layered_vqa.sample import toy_item
from lmms_scene.data.layered_vqa.schema import QUESTION_TYPES
from lmms_scene.metrics.layered_vqa import aggregation, judging, scoring
from lmms_scene.metrics.layered_vqa.grader import grade
from lmms_scene.metrics.layered_vqa.scoring import parse_selection, selection_scores


def fake_lemmas(word):
    # stands in for WordNet (lmms_scene.nlp.wordnet.lemma_names) in unit tests
    table = {
        "bottle": {"bottle", "flask"},
        "range": {"range", "mountain range", "chain"},
        "bear": {"bear"},
        "mountain range": {"mountain range", "range of mountains", "mountain chain"},
    }
    return table.get(word, {word})


@pytest.mark.parametrize(
    ("pred", "gold", "qtype", "ok"),
    [
        ("It is a bottle.", "A bottle.", "direct ask", True),
        ("bottles", "A bottle.", "direct ask", True),
        ("That is a flask", "A bottle.", "direct ask", True),  # synonym
        ("a cup", "A bottle.", "direct ask", False),
        ("I see a mountain chain behind the barns", "A mountain range.", "direct ask", True),
        ("a teddy bear", "A teddy bear.", "multi-hop", True),
        ("The white triangle", "The white triangle.", "occlusion", True),
        ("The blue triangle", "The white triangle.", "occlusion", False),
        ("Red", "Red.", "attribute binding", True),
        ("It is red in colour.", "Red.", "attribute binding", True),
        ("red and blue", "Red.", "attribute binding", False),
        ("Green.", "Red.", "attribute binding", False),
        ("2", "Two.", "counting", True),
        ("There are two of them.", "Two.", "counting", True),
        ("three", "Two.", "counting", False),
        ("There are five lions visible", "There are five lions visible in the field.", "counting", True),
        ("2 circles and 1 square", "Two circles and one square.", "counting", True),
        ("One square and two circles", "Two circles and one square.", "counting", True),  # bound to nouns
        ("two squares and one circle", "Two circles and one square.", "counting", False),
        ("2 and 1", "Two circles and one square.", "counting", True),  # in order
        (
            "Two dogs face the camera and one faces away",
            "Two dogs are facing frontward, and one dog is facing backward.",
            "counting",
            True,
        ),
        ("It is above the black square.", "Above the black square.", "spatial", True),
        ("below it", "Above the black square.", "spatial", False),
        ("To the left of the white bird", "The brown hawk is to the left of the white bird.", "spatial", True),
        ("left or right, hard to say", "To the left of the blue circle.", "spatial", False),
        ("", "A bottle.", "direct ask", False),
        ("   ", "Two.", "counting", False),
    ],
)
def test_rule_grader_paraphrases_and_wrong_answers(pred, gold, qtype, ok):
    assert grade(pred, gold, qtype, lemma_names=fake_lemmas).correct is ok


def test_empty_is_recorded_as_empty():
    assert grade("", "A bottle.").reason == "empty"


@pytest.mark.slow
def test_grader_with_real_wordnet_if_installed():
    lemma_names, source = scoring.default_lemma_names()
    if lemma_names is None:
        pytest.skip(source)
    assert grade("a feeding bottle", "A bottle.", "direct ask", lemma_names=lemma_names).correct


def test_selection_parsing_and_scores():
    sel, answer = parse_selection("A bottle.\nLayers: 2, 3", 4)
    assert sel == [2, 3] and answer == "A bottle."
    assert parse_selection("A bottle. Layers: 9", 4)[0] is None  # out of range: invalid
    assert parse_selection("A bottle.", 4) == (None, "A bottle.")
    s = selection_scores([1, 2, 3], minimal=[1, 2], distractors=[3])
    assert (
        s["precision"] == pytest.approx(2 / 3)
        and s["recall"] == 1.0
        and s["complete"]
        and s["excess"]
        and s["distractor"]
    )
    assert not s["exact"] and not s["invalid"]
    assert selection_scores([1, 2], [1, 2], [3])["exact"]
    bad = selection_scores(None, [1], [])
    assert bad["invalid"] and bad["f1"] == 0.0


def test_attempt_detection_and_bins():
    assert scoring.is_attempt("A red square.")
    # an ordinary answer after an acknowledgment is an answer
    assert scoring.is_attempt("Got it. The object is a triangle.")
    assert scoring.is_attempt(
        "Got it. The object is a triangle.", grade("Got it. The object is a triangle.", "A triangle.", "direct ask")
    )
    assert not scoring.is_attempt("Got it.") and not scoring.is_attempt("Okay, I'm ready for the next part.")
    hedge = "It could be a circle, a square or a triangle."
    assert not scoring.is_attempt(hedge, grade(hedge, "A circle.", "direct ask"))
    assert not scoring.is_attempt("Sure, please provide the rest of the question.")
    assert not scoring.is_attempt("What do you want to know?")
    assert not scoring.is_attempt("")
    assert [scoring.position_bin(t, 5) for t in range(5)] == list(scoring.POSITION_BINS)
    assert [scoring.position_bin(t, 3) for t in range(3)] == ["earliest", "midway", "latest"]
    with pytest.raises(ValueError):
        scoring.position_bin(0, 1)


def _doc(schedule):
    return dict(toy_item(4), schedule=schedule, seed=0)


def test_score_row_grounding_commit_and_failures():
    doc = _doc("sharded-v")  # 4 turns, evidence complete at turn 2
    turns = turns_of(doc)
    row = scoring.score_row(
        doc, ["Please show me more.", "A red square.", "A red square.", "A red square."], turns, lemma_names=fake_lemmas
    )
    assert row["correct"] and row["first_attempt"] == 1 and row["grounded"] is False and row["committed"]
    assert row["attempt_bin"] == "early" and row["grounded_correct"] is False and row["n_turns"] == 4
    late = scoring.score_row(doc, ["Go ahead.", "Waiting for more.", "A blue square.", "A red square."], turns)
    assert late["grounded"] is True and late["committed"] is False and late["grounded_correct"] is True
    short = scoring.score_row(dict(doc, question_id="toy-1"), ["A red square."], turns)
    assert short["failure"] == "conversation stopped after 1 of 4 turns" and short["correct"] is None
    assert short["grade_reason"] == "failed" and short["grounded_correct"] is None
    rep = aggregation.report([row, short], n_boot=50)
    assert rep["n_failed_conversations"] == 1 and rep["overall"]["not_computed"]["accuracy"] == 1
    assert rep["overall"]["accuracy"] == 1.0  # the failed conversation is left out, not a 0


def test_score_row_selection_and_joint():
    doc = _doc("oracle")
    row = scoring.score_row(doc, ["A red square.\nLayers: 1, 2"], turns_of(doc))
    assert row["correct"] and row["exact"] and row["joint"] and row["selection"] == [1, 2]
    row = scoring.score_row(doc, ["A red square.\nLayers: 1, 3"], turns_of(doc))
    assert row["correct"] and row["distractor"] and not row["joint"]


def _rows(correct_by_schedule, scenes=4):
    rows = []
    for s in range(scenes):
        for q in range(3):
            doc = dict(toy_item(4), scene_id=f"s{s}", question_id=f"s{s}-q{q}", question_type=QUESTION_TYPES[q])
            for schedule, correct in correct_by_schedule.items():
                d = dict(doc, schedule=schedule, seed=0)
                turns = turns_of(d)
                ans = "A red square." if correct(s, q) else "A green circle."
                outs = [ans] * len(turns)
                if schedule in SELECTION:
                    outs[-1] += "\nLayers: 1, 2"
                rows.append(scoring.score_row(d, outs, turns))
    return rows


def test_report_retained_accuracy_depth_and_relational():
    rows = _rows(
        {
            "full": lambda s, q: True,
            "sharded-v": lambda s, q: q == 0,
            "concat-v": lambda s, q: q != 2,
            "oracle": lambda s, q: True,
        }
    )
    rep = aggregation.report(rows, n_boot=200)
    assert rep["n_rows"] == len(rows) and rep["grader"] == "rule"
    assert rep["by_schedule"]["full"]["accuracy"] == 1.0
    assert rep["by_schedule"]["sharded-v"]["accuracy"] == pytest.approx(1 / 3)
    assert rep["retained"]["sharded-v"]["retained_accuracy"] == pytest.approx(1 / 3)
    # Visual: mean(accuracy sharded-v 1/3, concat-v 2/3) over full's 1
    assert rep["retained"]["by_column"]["visual"]["retained_accuracy"] == pytest.approx(0.5)
    assert (
        rep["overall"]["retained_visual"] == pytest.approx(0.5)
        and not rep["retained"]["by_column"]["visual"]["complete"]
    )
    lo, hi = rep["by_schedule"]["sharded-v"]["ci95"]["accuracy"]
    assert lo <= 1 / 3 <= hi
    # question type 2 ("occlusion") is relational, types 0-1 are not; concat-v loses only on type 2
    rel = rep["relational"]["concat-v"]
    assert rel["relational"] == -1.0 and rel["single_object"] == 0.0 and rel["extra_loss"] == -1.0
    assert rel["ci95"] == [-1.0, -1.0]  # every scene loses the same: no spread
    assert rep["retained"]["sharded-v"]["ci95"] == pytest.approx([1 / 3, 1 / 3])
    assert rep["by_depth"]["4"]["delta_concat-v"]["loss"] == pytest.approx(-1 / 3)
    assert rep["evidence"]["oracle"]["exact_match"] == 1.0
    assert set(rep["by_type_schedule"]) == set(QUESTION_TYPES[:3])


def test_report_deduplicates_regathered_rows():
    rows = _rows({"full": lambda s, q: True})
    assert aggregation.report(rows + rows[:3], n_boot=50)["n_duplicates"] == 3


def test_judge_rows_majority_self_exclusion_and_failures():
    from lmms_scene.judges import JudgeSpec

    class Client:
        def __init__(self, reply=None, exc=None):
            self.reply, self.exc = reply, exc

        def evaluate(self, request):
            if self.exc:
                raise self.exc
            return type("R", (), {"content": self.reply, "success": True})()

    rows = _rows({"full": lambda s, q: q == 0}, scenes=2)
    judges = [JudgeSpec("a", "org/A"), JudgeSpec("b", "org/B"), JudgeSpec("c", "org/C")]
    clients = {"a": Client("Yes."), "b": Client("Not correct."), "c": Client(exc=TimeoutError("slow"))}
    judged = judging.judge_rows(rows, judges, model="qwen2_5_vl", model_args="pretrained=org/C", clients=clients)
    # c is the evaluated model: excluded; a says yes, b says no: a tie, no consensus
    assert all(r["judge"]["excluded"] == ["c"] and r["correct"] is None for r in judged)
    summary = judging.judge_summary(judged)
    assert summary["no_consensus"] == len(rows) and summary["self_judges_excluded"] == ["c"]
    rep = aggregation.report(judged, n_boot=50)
    assert rep["grader"] == "llm_judge_majority" and rep["overall"]["not_computed"]["accuracy"] == len(rows)
    judged = judging.judge_rows(
        rows, judges, model="other", model_args="pretrained=org/D", clients={**clients, "b": Client("Correct")}
    )
    assert all(r["correct"] is True and r["judge"]["failed"] == 1 for r in judged)
    matrix = judging.self_preference({"other": judged})
    assert matrix == {"a": {"other": 1.0}, "b": {"other": 1.0}}


def test_tables_render_from_results():
    from lmms_scene.metrics.layered_vqa import tables
    from lmms_scene.results import TaskResult, label_runs

    rows = _rows(
        {
            "full": lambda s, q: True,
            "sharded-v": lambda s, q: q == 0,
            "recap-v": lambda s, q: True,
            "concat-v": lambda s, q: q != 2,
            "oracle": lambda s, q: True,
        }
    )
    res = TaskResult(
        "layered_vqa_sample",
        "layered_vqa",
        {},
        {},
        "m",
        "pretrained=x/tiny",
        None,
        samples=[{"layered_vqa_report": r} for r in rows],
    )
    view = tables.view([res], label_runs([res])[0])
    text = view.text()
    titles = [t.title for t in view.tables]
    for name in ("Table 1", "Table 2", "Table 7", "Figure 6", "Figure 8", "Figure 9"):
        assert any(t.startswith((f"Layered-VQA {name}:", f"Layered-VQA {name} (")) for t in titles), (name, titles)
    # the headline first, in percent: Visual = mean(sharded-v 1/3, recap-v 1, concat-v 2/3) / full 1
    t1 = view.tables[0]
    assert t1.title.startswith("Layered-VQA Table 1") and t1.header[:5] == [
        "model",
        "retained text",
        "retained visual",
        "retained layered",
        "full",
    ]
    (line,) = t1.rows
    assert line[0] == "tiny" and line[1] is None  # no question-in-text schedule ran: no Text column, never a 0
    assert line[2].mean == pytest.approx(2 / 3) and line[2].scale == 100
    assert t1.cells()[0][2].startswith("66.67") and "| tiny |  | 66.67" in text
    rep = aggregation.report(rows, n_boot=50)
    # Figure 9: sharded-v costs 2/3 against full, recap-v recovers it all: no overshoot
    fig9 = rep["restoration"]["visual"]
    assert (
        fig9["cost"] == pytest.approx(-2 / 3) and fig9["recovery"] == pytest.approx(2 / 3) and fig9["overshoot"] == 0.0
    )
    # Figure 8: concat-v loses on question type 2 only: a third of the questions hold all of the loss
    conc = rep["loss_concentration"]["concat-v"]
    assert conc["share_of_questions_for_half"] == pytest.approx(1 / 6) and conc[
        "share_of_questions_for_80"
    ] == pytest.approx(4 / 12)
    assert conc["running_share"][3] == 1.0 and rep["loss_concentration"]["oracle"]["running_share"] is None
    # Figure 6: every turn of a multi-turn schedule is an attempt here ("A red square." / "A green circle.")
    by_attempt = rep["attempts"]["by_attempt"]
    assert list(by_attempt) == ["1", "2", "3", "4", "5"] and by_attempt["5"]["n"] == 12  # recap-v's fifth turn
    assert rep["attempts"]["baseline"]["accuracy"] == 1.0
    none = TaskResult("layered_vqa_full", "layered_vqa", {}, {}, "m", "", None, samples=None)
    empty = tables.view([none], label_runs([none])[0])
    assert not empty.tables and not empty.used
    ((_, why),) = empty.skipped
    assert why.startswith("task layered_vqa_full: without logged samples") and "--log_samples" in why


@pytest.mark.slow
def test_repeats_expand_and_reliability():
    from lmms_scene.tasks.layered_vqa import utils

    doc = dict(toy_item(4), schedule="full", seed=0)
    # three repeats of a one-turn conversation, in two of the harness's shapes
    out = utils.process_results(doc, [["A red square."], "('A blue circle.',)", ["red square"]])
    row = out["accuracy"]
    assert row["repeat"] == 0 and [r["repeat"] for r in row["repeat_rows"]] == [1, 2]
    assert [r["correct"] for r in aggregation.expand_repeats([row])] == [True, False, True]
    rep = aggregation.report([row], n_boot=50)
    assert rep["n_rows"] == 3
    cell = rep["reliability"]["full"]
    # Laban et al.: aptitude = P90, unreliability = P90 - P10 (numpy linear percentiles of [0, 1, 1]); the mean beside them
    assert (
        cell["aptitude"] == 1.0
        and cell["unreliability"] == pytest.approx(0.8)
        and cell["average"] == pytest.approx(2 / 3)
    )
    # one repeat: a single conversation, however the harness shapes it
    assert conversations([["a", "b"]]) == [[["a", "b"]]]
    assert conversations(["('a', 'b')"]) == [["('a', 'b')"]]
    assert conversations(["a", "b"]) == [["a", "b"]]
    # through the tasks' KeepRepeats filter: every sample, in either shape
    (kept,) = KeepRepeats().apply([[["a", "b"], "('c', 'd')"]], [None])
    assert conversations([kept]) == [["a", "b"], ["('c', 'd')"]]


def test_cli_judge_over_a_results_folder_with_offline_dummy_judges(tmp_path, capsys):
    import json

    from lmms_scene.cli import main

    rows = _rows({"full": lambda s, q: True, "oracle": lambda s, q: q == 0}, scenes=2)
    run = tmp_path / "out" / "model"
    run.mkdir(parents=True)
    results = {
        "results": {"layered_vqa_sample": {"accuracy,none": 0.5}},
        "configs": {"layered_vqa_sample": {"metadata": {"benchmark": "layered_vqa"}}},
        "config": {"model": "qwen2_5_vl", "model_args": "pretrained=org/judged"},
    }
    (run / "20260101_results.json").write_text(json.dumps(results))
    (run / "20260101_samples_layered_vqa_sample.jsonl").write_text(
        "".join(json.dumps({"doc_id": i, "layered_vqa_report": r}) + "\n" for i, r in enumerate(rows))
    )
    # "judged" is the evaluated model: excluded; the dummy providers answer "dummy" (no verdict)
    code = main(
        [
            "layered-vqa",
            "judge",
            str(tmp_path / "out"),
            "--judges",
            "dummy:d1=x;dummy:judged=org/judged",
            "--out",
            str(tmp_path / "j.json"),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert f"{len(rows)} without consensus" in text and "self-judges excluded: ['judged']" in text
    saved = json.loads((tmp_path / "j.json").read_text())
    rep = saved["reports"]["judged"]
    assert rep["grader"] == "llm_judge_majority" and rep["judges"]["unparsed_replies"] == len(rows)
    assert rep["overall"]["not_computed"]["accuracy"] == len(rows)
    assert main(["layered-vqa", "judge", str(tmp_path / "nothing"), "--judges", "dummy:d=x"]) == 2


def test_group_retained_accuracy_from_the_schedules_parts():
    from lmms_scene.metrics.layered_vqa import aggregation

    def rows(schedule, correct):
        return [{"schedule": schedule, "correct": c, "scene_id": f"s{k}"} for k, c in enumerate(correct)]

    full = aggregation.schedule_part(rows("full", [True, True, False, None]))
    assert full["n_correct"] == 2 and full["n_graded"] == 3 and full["retained_accuracy"] is None
    half = aggregation.schedule_part(rows("sharded-q", [True, False, False]))
    same = aggregation.schedule_part(rows("recap-q", [True, True, False]))
    vis = aggregation.schedule_part(rows("concat-v", [False, False, False]))
    # Text: mean(1/3, 2/3) / (2/3) = 0.75; Visual: 0 / (2/3) = 0; Layered: no schedule, undefined
    assert aggregation.retained_from_parts([full, half, same, vis], "text") == pytest.approx(0.75)
    assert aggregation.retained_from_parts([full, half, same, vis], "visual") == 0.0
    assert aggregation.retained_from_parts([full, half, same, vis], "layered") is None
    assert aggregation.retained_from_parts([half, same], "text") is None  # no full: undefined, not 0
    assert aggregation.schedule_part(rows("full", [None])) is None
    assert aggregation.schedule_part(rows("full", [True]) + rows("oracle", [True])) is None


def test_retained_accuracy_reproduces_the_papers_surviving_value():
    """Table 1 prints one retained value, Text = 108 for Qwen2.5-VL-32B: its full accuracy
    .559 and its four question-in-text schedules .549, .533, .711, .630."""
    assert round(100 * aggregation.retained(0.559, [0.549, 0.533, 0.711, 0.630])) == 108
    # and on scored rows: the same accuracies give the same column (each schedule its own accuracy)
    rows = []
    accs = {"full": 0.559, "concat-q": 0.549, "sharded-q": 0.533, "recap-q": 0.711, "snowball-q": 0.630}
    for schedule, acc in accs.items():
        n_right = round(acc * 1000)
        rows += [
            {
                "scene_id": f"s{k % 10}",
                "question_id": f"q{k}",
                "schedule": schedule,
                "repeat": 0,
                "correct": k < n_right,
            }
            for k in range(1000)
        ]
    got = aggregation._retained(rows, list(accs), n_boot=50, seed=0)["by_column"]["text"]
    assert round(100 * got["retained_accuracy"]) == 108 and got["complete"]
    lo, hi = got["ci95"]
    assert lo <= got["retained_accuracy"] <= hi


def test_cross_judging_fills_figure_4_with_a_boxed_diagonal():
    """Two models each judged by both: every judge answers about every output, its own
    included; the consensus never counts a self-judgment; the matrix has the diagonal."""
    from lmms_scene.judges import JudgeSpec

    class Client:
        def __init__(self, reply):
            self.reply, self.n = reply, 0

        def evaluate(self, request):
            self.n += 1
            return type("R", (), {"content": self.reply, "success": True})()

    judges = [JudgeSpec("qa", "org/QA"), JudgeSpec("qb", "org/QB")]
    clients = {"qa": Client("Yes."), "qb": Client("No.")}  # qa praises everything, qb nothing
    rows = _rows({"full": lambda s, q: True}, scenes=2)
    runs = {
        "QA": judging.judge_rows(rows, judges, model="qwen2_5_vl", model_args="pretrained=org/QA", clients=clients),
        "QB": judging.judge_rows(rows, judges, model="qwen2_5_vl", model_args="pretrained=org/QB", clients=clients),
    }
    assert clients["qa"].n == clients["qb"].n == 2 * len(rows)  # every judge, every answer
    # QA's outputs: only qb votes (no); QB's outputs: only qa votes (yes)
    assert {r["correct"] for r in runs["QA"]} == {False} and {r["correct"] for r in runs["QB"]} == {True}
    matrix = judging.self_preference(runs)
    assert matrix == {"qa": {"QA": 1.0, "QB": 1.0}, "qb": {"QA": 0.0, "QB": 0.0}}
    assert judging.self_cells(runs) == [("qa", "QA"), ("qb", "QB")]
    table = judging.self_preference_table(matrix, judging.self_cells(runs))
    assert "| qa | [1.000] | 1.000 |" in table and "| qb | 0.000 | [0.000] |" in table
    assert judging.judge_summary(runs["QA"])["self_judgments"] == len(rows)
