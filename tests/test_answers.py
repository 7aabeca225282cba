"""The shared answer readers (lmms_scene/metrics/answers.py) read directly: tokens and
layer references, mentions of counts, colours, shapes and relations in context (negated,
listed as options), yes/no replies, option letters and refusals. Every reply here was
written for this file."""

from __future__ import annotations

import pytest

from lmms_scene.metrics import answer_words, answers
from lmms_scene.metrics.answers import (
    chosen_option,
    colour_mentions,
    mark_context,
    number_mentions,
    relation_mentions,
    says_cannot_tell,
    shape_mentions,
    tokens,
    yes_no,
)


def _read(finder, reply):
    toks = tokens(reply)
    found = finder(toks)
    mark_context(toks, found)
    return [(m.value, m.affirmed, m.negated, m.option) for m in found]


def test_tokens_drop_layer_references_and_fold_spellings():
    assert tokens("Layer 3 shows a Grey-blue colour.") == ["layerref", "shows", "a", "grey", "blue", "color", "."]
    assert tokens("L2: “Two”") == ["layerref", ":", "two"]


def test_counts_are_read_with_their_nouns_and_not_from_layer_numbers():
    toks = tokens("In layer 4 I count 3 red squares and no circles; the red one is big.")
    found = number_mentions(toks)
    assert [(m.value, m.words[-1]) for m in found] == [(3, "square"), (0, "circle")]
    # "one" after an article is a pronoun, not a count; "two images" is about the delivery
    assert number_mentions(tokens("The blue one, seen in two images.")) == []


def test_negation_and_options_in_context():
    assert _read(colour_mentions, "It is not red, it is navy.") == [
        ("red", False, True, False),
        ("blue", True, False, False),
    ]
    assert _read(shape_mentions, "It could be a circle, a square or a triangle.") == [
        ("circle", False, False, True),
        ("square", False, False, True),
        ("triangle", False, False, True),
    ]
    assert _read(relation_mentions, "The cup is to the left of the plate, not above it.") == [
        ("left", True, False, False),
        ("above", False, True, False),
    ]
    # "right" as agreement is no side
    assert relation_mentions(tokens("That's right, the lamp.")) == []


@pytest.mark.parametrize(
    ("reply", "question", "read"),
    [
        ("Yes, there is a dog.", "Is there a dog?", (True, "opens with yes")),
        ("Nope.", None, (False, "opens with no")),
        ("I see a dog. So the answer is no.", "Is there a cat?", (False, "the stated final answer")),
        ("(B) the lamp is off", "Is the lamp on? (A) yes (B) no", (False, "the option letter it picks")),
        ("User: Is it on? Assistant: Yes.</s>", None, (True, "opens with yes")),
        ("The two boxes are the same size.", "Is the red box larger than the blue box?", (False, None)),
        ("The mug is not on the table.", "Is the mug on the table?", (False, None)),
        ("I'm sorry, I cannot determine that.", "Is the mug on the table?", (None, "says it cannot tell")),
        ("Well, yes and no.", "Is the mug on the table?", (None, "hedges between yes and no")),
        ("Bananas are yellow.", "Is the mug on the table?", (None, None)),
    ],
)
def test_yes_no(reply, question, read):
    said, how = yes_no(reply, question)
    assert said is read[0]
    if read[1] is not None:
        assert how == read[1]
    else:
        assert how  # every reading says how it was read


def test_option_letters_read_by_the_question_s_options():
    question = "Is the sky green? (A) yes (B) no"
    assert chosen_option("B", question) == "no"
    assert chosen_option("I would select choice (A)", question) == "yes"
    assert chosen_option("(A) no, it is blue", question) == "no"  # the word said beside the letter
    assert chosen_option("The sky is blue.", question) is None
    assert chosen_option("C", question) is None  # a letter the question does not list


def test_refusals():
    assert says_cannot_tell("I can't tell from this picture.")
    assert says_cannot_tell("Please provide a clearer image.")
    assert not says_cannot_tell("There are two cats.")


def test_vocabularies_fold_spellings():
    assert answer_words.COLOUR_WORDS["crimson"] == "red"
    assert answer_words.OPPOSITE["left"] == "right"
    assert answers.SENTENCE_BREAK is answer_words.SENTENCE_BREAK
