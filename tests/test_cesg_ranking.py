"""CESG ranks a right answer above a wrong one (issue 28, item 3): the triples written for
lmms-scene in tests/data/snus_ranking_triples.jsonl, and each failure pattern the issue
names (sentences written here)."""

from __future__ import annotations

import json

import pytest

from lmms_scene.metrics.cesg import cesg_score
from lmms_scene.metrics.cesg.graph import Attribute, Node, Relation
from lmms_scene.metrics.cesg.match import EXTRA_DEPENDENT_COST, fold_extra_dependents
from lmms_scene.metrics.cesg.negation import normalise_lists
from lmms_scene.metrics.cesg.triples import TRIPLES, rank_triples, read_triples

pytestmark = pytest.mark.slow


def test_every_triple_ranks_the_correct_answer_first_with_a_wide_median_margin():
    rows = read_triples()
    assert len(rows) >= 60
    assert {r["wrong"] for r in rows} == {"object", "entity"}
    res = rank_triples(rows)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
    losers = [x for x in res["rows"] if x["margin"] <= 0]
    assert not losers, losers
    assert res["win_rate"] == 1.0
    assert res["median_margin"] >= 0.3
    assert res["per_wrong_kind"]["entity"]["n"] >= 20


def test_triples_file_errors_name_the_line_and_field(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_text(
        json.dumps({"id": "x", "reference": "There is no rail.", "correct": "", "wrong_answer": "No cone."}) + "\n"
    )
    with pytest.raises(ValueError, match=r"line 1: field 'correct'"):
        read_triples(bad)
    assert TRIPLES.exists()


REF_Q6 = "The worker on the scaffold is not wearing a hard hat. The worker on the ground is wearing a hard hat."


def test_the_right_worker_by_synonym_beats_the_wrong_worker_named_exactly():
    right = cesg_score("The man on the scaffold has no helmet on.", REF_Q6)
    wrong = cesg_score("The worker on the ground is not wearing a hard hat.", REF_Q6)
    assert right["F1_r"] == 1.0 and wrong["F1_r"] == 0.0  # helmet ~ hard hat, have ~ wear, man ~ worker on one spot
    assert right["CESG"] - wrong["CESG"] >= 0.3


def test_another_person_named_differently_gets_no_relation_credit():
    ref = "The welder at the bench is not wearing a face shield. The helper near the door is wearing a face shield."
    wrong = cesg_score("The helper near the door is not wearing a face shield.", ref)
    assert wrong["F1_r"] == 0.0
    assert cesg_score("The helper is not wearing a face shield.", ref)["F1_r"] == 0.0


def test_a_per_entity_list_keeps_its_relations_and_the_swapped_list_scores_lower():
    ref = "The man on the left is not wearing a hard hat. The man on the right is not wearing gloves."
    assert normalise_lists("1. Man on the left: no hard hat\n2. Man on the right: no gloves") == (
        "The man on the left has no hard hat. The man on the right has no gloves."
    )
    right = cesg_score("1. Man on the left: no hard hat\n2. Man on the right: no gloves", ref)
    swapped = cesg_score("1. Man on the left: no gloves\n2. Man on the right: no hard hat", ref)
    assert right["F1_r"] == 1.0 and swapped["F1_r"] == 0.0
    assert right["CESG"] > swapped["CESG"]


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("- Worker on the ladder: not wearing a harness", "The worker on the ladder is not wearing a harness."),
        ("**Worker 1 (on the ladder):** No harness.", "The worker on the ladder has no harness."),
        (
            "Worker on the left - no hard hat, no vest.",
            "The worker on the left has no hard hat. The worker on the left has no vest.",
        ),
        ("Woman on the left:\n- no ear protection", "The woman on the left has no ear protection."),
        ("Missing: dust mask, ladder.", "There is no dust mask. There is no ladder."),
        (
            "The worker is sanding the drywall while standing on a bucket near the wall of the garage. Missing: dust mask, ladder.",
            "The worker is sanding the drywall while standing on a bucket near the wall of the garage. There is no dust mask. There is no ladder.",
        ),
        ("Scaffold: no guardrail", "No guardrail."),  # not a person: no subject invented
        ("Note: the worker is on the roof.", "The worker is on the roof."),
    ],
)
def test_list_lines_become_sentences(text, sentences):
    assert normalise_lists(text) == sentences


def test_a_one_line_header_after_prose_is_read():
    ref = "There is no dust mask. There is no ladder."
    s = cesg_score(
        "The worker is sanding the drywall while standing on a bucket near the wall of the garage. Missing: dust mask, ladder.",
        ref,
    )
    assert s["F1_o"] == 1.0


def test_a_dependent_the_reference_does_not_mention_costs_a_little_not_a_type():
    ref = "The gas cylinders are not secured. There is no fire extinguisher."
    s = cesg_score("The gas cylinders are not chained to the wall, and there is no fire extinguisher.", ref)
    assert s["F1_r"] is None  # the relation "chain to wall" is the attribute "chain" plus a dependent
    assert s["CESG"] >= 0.85
    plain = cesg_score("The gas cylinders are not chained, and there is no fire extinguisher.", ref)
    assert s["CESG"] < plain["CESG"]  # the extra dependent still costs something
    # who lacks the object, when the reference says only that it is absent
    holder = cesg_score("The worker is not wearing a hard hat.", "There is no hard hat.")
    assert holder["F1_r"] is None and 0.85 <= holder["CESG"] < 1.0


def test_folding_is_only_for_dependents_the_reference_does_not_state():
    cyl, wall = Node("cylinder", False), Node("wall", False)
    attr = Attribute(cyl, "chain", True)
    rel = Relation(cyl, "chain to", wall, True)
    P = {"o": [], "a": [attr], "r": [rel]}
    kept, folded = fold_extra_dependents(P, {"o": [], "a": [attr], "r": []})
    assert kept["r"] == [] and folded == {"o": 0, "a": 1, "r": 0}
    # the reference states the relation (with another dependent): a real relation comparison
    other = Relation(cyl, "chain to", Node("pipe", False), True)
    kept, folded = fold_extra_dependents(P, {"o": [], "a": [attr], "r": [other]})
    assert kept["r"] == [rel] and folded["a"] == 0
    assert 0 < EXTRA_DEPENDENT_COST < 1
