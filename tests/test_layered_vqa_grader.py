"""The Layered-VQA rule grader against hand-labelled replies written the way VLMs write
(tests/data/layered_vqa_replies*.jsonl; docs/layered_vqa.md, "Grading", gives the figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmms_scene.metrics.layered_vqa import scoring
from lmms_scene.metrics.layered_vqa.grader import (
    CANNOT_TELL,
    CORRECT,
    WRONG,
    answer_kind,
    grade,
)
from lmms_scene.metrics.layered_vqa.grader_io import grade_answers, read_answers

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"
#: 245 replies written while the grader was built, 72 written before it was run on them
SETS = {"development": DATA / "layered_vqa_replies.jsonl", "held_out": DATA / "layered_vqa_replies_heldout.jsonl"}


@pytest.fixture(scope="module")
def wordnet():
    lemma_names, source = scoring.default_lemma_names()
    return lemma_names


@pytest.mark.parametrize("name", list(SETS))
@pytest.mark.parametrize("synonyms", ["wordnet", "none"])
def test_agreement_with_the_labelled_replies(name, synonyms, wordnet):
    if synonyms == "wordnet" and wordnet is None:
        pytest.skip("WordNet not installed (make nlp-data)")
    records = read_answers(SETS[name])
    out = grade_answers(records, wordnet if synonyms == "wordnet" else None)
    summary = out["summary"]
    misses = [(g["id"], g["label"], g["verdict"], g["reason"]) for g in out["grades"] if not g["agrees"]]
    assert summary["agreement"] >= 0.97, misses
    # a wrong reply graded right, or a right one graded wrong, ranks a wrong answer above a right one
    assert summary["confusion"][WRONG][CORRECT] == 0 and summary["confusion"][CORRECT][WRONG] == 0, misses


def test_the_set_covers_the_styles_and_outcomes():
    records = [r for path in SETS.values() for r in read_answers(path)]
    assert len(records) >= 300
    styles = {r["style"] for r in records}
    assert {"terse", "verbose", "hedged", "layers", "restating", "negated", "options", "refusal"} <= styles
    labels = {r["label"] for r in records}
    assert labels == {CORRECT, WRONG, CANNOT_TELL}
    assert sum(r["style"] == "layers" for r in records) >= 40


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5, 6, 9, 12])
def test_layer_numbers_are_never_counts_or_answers(k):
    other = (k + 1) % 7
    for reply, gold, ok in [
        (f"Layer {k} and layer {other} each show a square, so there are two squares.", "Two.", CORRECT),
        (f"Layers {k} and {other} show squares: two squares.", "Two.", CORRECT),
        (f"[layer {k} of the scene] shows one square.", "One.", CORRECT),
        (f"In layer {k} I see three circles.", "Three.", CORRECT),
        (f"In layer {k} I see three circles.", "Two.", WRONG),
        (f"Layer {k}: a red circle.\nLayers: {k}", "A circle.", CORRECT),
        (f"The object in layer {k} is a triangle.", "A triangle.", CORRECT),
        (f"L{k} shows the square to the left of the circle.", "To the left of the circle.", CORRECT),
    ]:
        qtype = "counting" if gold[0].isupper() and gold.split()[0].rstrip(".") in ("Two", "One", "Three") else None
        assert grade(reply, gold, qtype).verdict == ok, (reply, gold)


def test_the_issue_examples():
    assert grade("Not yellow.", "Yellow.", "attribute binding").verdict == WRONG
    assert grade("It is not a triangle; it is a circle.", "A triangle.", "direct ask").verdict == WRONG
    assert grade("It is not a triangle; it is a circle.", "A circle.", "direct ask").verdict == CORRECT
    assert grade("not left", "To the left of the blue triangle.", "spatial").verdict == WRONG
    assert grade("Not two, there are three.", "Two.", "counting").verdict == WRONG
    assert grade("Not two, there are three.", "Three.", "counting").verdict == CORRECT
    assert grade("The yellow square is over the black circle.", "Above the black circle.", "spatial").verdict == CORRECT
    assert grade("It is on top of the black circle.", "Above the black circle.", "spatial").verdict == CORRECT
    assert grade("She holds a stuffed bear.", "A teddy bear.", "multi-hop").verdict == CORRECT
    assert grade("it could be a circle, a square or a triangle", "A circle.", "direct ask").verdict == CANNOT_TELL
    assert grade("two triangles and one circle", "Two triangles and one circle.", "counting").verdict == CORRECT
    assert grade("one triangle and two circles", "Two triangles and one circle.", "counting").verdict == WRONG
    # a second colour in the reply that belongs to another object
    q = "What colour is the large triangle?"
    assert (
        grade("The large triangle is blue; the small circle is red.", "Blue.", "attribute binding", q).verdict
        == CORRECT
    )


def test_answer_kinds():
    assert [
        answer_kind(g, t)
        for g, t in [
            ("Yes.", "spatial"),
            ("Two.", "counting"),
            ("To the left of the cat.", "spatial"),
            ("Red.", "attribute binding"),
            ("A circle.", "direct ask"),
            ("A teddy bear.", "multi-hop"),
            ("There are five lions visible in the field.", "counting"),
        ]
    ] == ["yes/no", "count", "relation", "colour", "shape", "object", "count"]


def test_empty_and_cannot_tell_are_their_own_outcomes():
    assert grade("", "A bottle.").reason == "empty" and not grade("", "A bottle.").correct
    g = grade("I cannot determine the shape from these layers.", "A circle.", "direct ask")
    assert g.verdict == CANNOT_TELL and g.reason == "says it cannot tell" and not g.correct


def test_cli_grade_text_json_and_bad_input(tmp_path, capsys):
    from lmms_scene.cli import main

    path = tmp_path / "answers.jsonl"
    lines = [
        {
            "id": "a",
            "gold": "Two.",
            "question_type": "counting",
            "answer": "Layer 4 and layer 2 each show a square, so there are two squares.",
        },
        {"id": "b", "gold": "Yellow.", "question_type": "attribute binding", "answer": "Not yellow.", "label": "wrong"},
        {
            "id": "c",
            "gold": "A circle.",
            "question_type": "direct ask",
            "answer": "It could be a circle, a square or a triangle.",
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["layered-vqa", "grade", "--input", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("a\tcorrect\t") and out[1].startswith("b\twrong\t") and "(label: agrees)" in out[1]
    assert out[2].startswith("c\tcannot_tell\tlists options")
    assert "agreement with the labels: 1.000 (1/1)" in out[-1]
    assert main(["layered-vqa", "grade", "--input", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["verdict"] for g in doc["grades"]] == ["correct", "wrong", "cannot_tell"] and doc["summary"]["verdicts"][
        "cannot_tell"
    ] == 1
    assert doc["summary"]["grader"]["grader"] == "lmms_scene.metrics.layered_vqa.grader.grade"
    for bad, message in [
        ({"id": "x", "gold": "Two.", "answer": "2"}, "line 1: missing field 'question_type'"),
        (
            {"id": "x", "gold": "Two.", "question_type": "trivia", "answer": "2"},
            "line 1: question_type: 'trivia' is not one of",
        ),
        ({"id": "x", "gold": "Two.", "question_type": "counting", "answer": 2}, "line 1: answer: expected a string"),
        (
            {"id": "x", "gold": "", "question_type": "counting", "answer": "2"},
            "line 1: gold: expected a non-empty string",
        ),
        (
            {"id": "x", "gold": "Two.", "question_type": "counting", "answer": "2", "label": "maybe"},
            "line 1: label: 'maybe' is not one of",
        ),
    ]:
        path.write_text(json.dumps(bad) + "\n")
        assert main(["layered-vqa", "grade", "--input", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    path.write_text("{not json\n")
    assert main(["layered-vqa", "grade", "--input", str(path)]) == 2
    assert "line 1: not JSON" in capsys.readouterr().err
