"""The SNUS negation reader on the forms crowd-written referring expressions use (issue 28,
the NegRefCOCOg misses in bench/bench_negation_corpus.py's development split) and the
reader's leftovers from the 64 ranking triples. Every sentence here was written for
lmms-scene; none is copied from a corpus."""

from __future__ import annotations

import pytest

from lmms_scene.metrics.cesg import checks

pytestmark = pytest.mark.slow  # loads spaCy and WordNet

# (text, a word every reading must contain among its absent elements)
READ = [
    # contrast inside a referring expression: the contrasted thing is what is not meant
    ("the dog, not the dog's shadow", "shadow"),
    ("the teapot, not its reflection in the window", "reflection"),
    ("the desk lamp, not the floor lamp", "floor lamp"),
    ("horse on the beach not shadow", "shadow"),
    ("a shirt with stripes, not a logo", "logo"),
    ("the lady in red, but not the stroller in her hands", "stroller"),
    # a part not in view
    ("a horse with its tail not visible", "tail"),
    ("a woman whose feet are not showing", "foot"),
    # only partly in the picture: a negated "fully visible"
    ("the cow that is not fully in the frame", "cow fully visible"),
    # a negated preposition after another one
    ("a chair beside the table, not near the window", "chair near window"),
    ("the laptop on the desk and not on the sofa", "laptop on sofa"),
    # a negated verb after another one, its subject found
    ("the woman holding a cup and not looking at the child", "woman look at child"),
    ("the horse standing still, not grazing", "horse graze"),
    # "without" hung on an adjective, or before a clause the small model invents
    ("a brown and white dog, without a collar", "collar"),
    ("a girl without a hat holding a balloon", "hat"),
    ("a goat standing on a rock without eating anything", "eat"),
    # leftovers of the ranking triples' first wording
    ("There is no speed limit sign on the road.", "speed limit sign"),
    ("I see no fire extinguisher close to it.", "fire extinguisher"),
    ("The ladder leans on the wall and nobody is holding it at the base.", "person hold ladder"),
]


@pytest.mark.parametrize("text, element", READ)
def test_referring_forms_are_read(text, element):
    got = checks.read(text)
    assert got["negative"], got
    assert any(element in e for e in got["elements"]), got["elements"]


def test_examples_after_such_as_share_the_absence_and_make_no_relation():
    got = checks.read("The welder does not have any eye protection such as safety glasses.")["elements"]
    assert "safety glasses" in got and "eye protection" in got
    assert not any(" as " in e for e in got), got  # was "eye protection as safety glasses"


def test_compounds_of_compounds_keep_every_word():
    got = checks.read("No speed limit sign is posted on this road.")["elements"]
    assert any(e.startswith("speed limit sign") for e in got), got


# what the new pass must leave alone: displays' words, the picture itself, double negations
NOTHING = [
    "a tram displaying not in use",
    "the photo did not load properly",
    "The fire extinguisher is not missing.",
    "No worker is without a helmet.",
    "The welder never welds without a mask.",
    "Not only the driver but also the passenger wears a belt.",
]


@pytest.mark.parametrize("text", NOTHING)
def test_not_absences_stay_unread(text):
    got = checks.read(text)
    assert not got["negative"], got
