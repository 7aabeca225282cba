"""What the SNUS negation reader extracts and what it must leave alone (docs/snus.md, "What
counts as an absence"), one test per form the third-party corpora showed (issue 28).
Every sentence here was written for lmms-scene; bench/bench_negation_corpus.py measures
the same reader on text that other people wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmms_scene.metrics.cesg import checks, score_corpus
from lmms_scene.metrics.cesg.negation import strip_negation

pytestmark = pytest.mark.slow

FORMS = Path(__file__).parent / "data" / "snus_negation_forms.jsonl"


def test_the_forms_set_agrees_per_kind():
    res = checks.labelled_agreement(FORMS)
    assert res["n"] >= 30 and set(res["per_kind"]) >= {"contrast", "nominal", "ellipsis", "action", "not_absence"}
    assert all(k["agreement"] == 1.0 for k in res["per_kind"].values()), res["disagreements"]
    assert res["element_agreement"] == 1.0, res["element_disagreements"]


# (text, the absent element it must contain) -- the quoted misses and our own
EXTRACTED = [
    ("This image includes an oven but not a bottle.", "bottle"),
    ("The photo features a cat, but not a dog.", "dog"),
    ("The worker is wearing regular sneakers rather than steel-toe boots.", "steel-toe boot"),
    ("The site has a ladder but not a guardrail.", "guardrail"),
    ("The shop is devoid of customers.", "customer"),
    ("The room is dim due to the lack of lighting.", "lighting"),
    ("Two men sans shirts are playing volleyball.", "shirt"),
    ("A wheelchair with nobody in it stands by the door.", "person"),
    ("A small cafe without any outdoor seating available.", "outdoor seating"),
    ("The stadium is full of fans and there's no scoreboard visible above the field.", "scoreboard"),
    ("One is wearing a hard hat and the other is not.", "hard hat"),
    ("One wearing a shirt, one isn't.", "shirt"),
    ("There is no talking in the video.", "talk"),
    ("The clip does not feature baking.", "bake"),
    ("A tall man standing next to the red car near the building on the corner is not wearing a fedora.", "fedora"),
    ("The baseball player who is not holding a bat.", "hold bat"),
    ("A giraffe that is not eating.", "eat"),
    ("The elephant not in the water.", "in water"),
    # an absent sign is an absence; only a quoted "no X", or one inside a noun phrase of its
    # own ("a no parking sign"), is a label (caught when the label rule took every "no X sign")
    ("There is no stop sign at the junction.", "stop sign"),
    ("No speed limit sign is posted on this road.", "sign"),
    ("There is no exit sign above the door.", "exit sign"),
]


@pytest.mark.parametrize("text, element", EXTRACTED)
def test_absences_are_read_with_their_names(text, element):
    got = checks.read(text)
    assert got["negative"], got
    assert any(element in e for e in got["elements"]), got["elements"]


def test_contrast_names_the_contrasted_object_only():
    # the misparsed modifier ("oven" tagged an adjective of "bottle") is its own, present object
    assert checks.read("This image includes an oven but not a bottle.")["elements"] == ["bottle"]
    assert checks.read("The site has a ladder but not a guardrail.")["elements"] == ["guardrail"]


NOT_ABSENCES = [
    "A pillar with a missing persons sign.",
    "A poster of a missing young woman.",
    "Two teenagers are up to no good.",
    "A 'no parking' sign on the wall.",
    "A red no entry sign on the gate.",
    "The boy pays no attention to the dog.",
    "The batter missed the ball.",
    "A man wearing nothing but a cloth around his waist.",
    "Not only the welder but also his helper wears a mask.",
    "The man packs meat into a box.",
]


@pytest.mark.parametrize("text", NOT_ABSENCES)
def test_signs_idioms_attitudes_failed_actions_and_exclusives_read_as_nothing(text):
    got = checks.read(text)
    assert not got["negative"] and got["elements"] == [], got


def test_a_present_action_keeps_its_verb_out_of_object_names():
    # "pack meat" / "arrange computer": a verb never becomes part of an object's name
    got = checks.read("The man packing meat is not wearing gloves. The woman arranging computers has no badge.")
    assert got["negative"]
    assert not any("pack" in e.split()[0] or e.startswith("arrange") for e in got["elements"]), got["elements"]
    assert any(e == "glove" or e == "gloves" for e in got["elements"]) and "badge" in got["elements"]


EDGE = [
    "sans",
    "rather than",
    "not",
    "One isn't.",
    "The other is not.",
    "no",
    "devoid of",
    "the lack of",
    "A 'no",
    "but not",
    "instead of",
    "There is no " + "very " * 3000 + "helmet.",
    "Ce n'est pas un casque 🚧 sans <b>gants</b>\x00",
]


@pytest.mark.parametrize("text", EDGE)
def test_fragments_of_the_new_forms_are_recorded_not_raised(text):
    got = checks.read(text)
    assert isinstance(got["negative"], bool) and isinstance(got["elements"], list)
    assert isinstance(strip_negation(text), str)
    row = score_corpus([("r", text, ["There is no helmet."])])["rows"][0]
    assert row["status"] in ("scored", "empty_prediction", "prediction_without_absent_information")
    assert row["CESG"] is not None and 0.0 <= row["CESG"] <= 1.0
