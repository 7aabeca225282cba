"""The grader reads the answer a reply commits to (issue 29): one test per failure form seen
on replies that real VLMs wrote (bench/bench_real_replies.py measures those; the replies
here are written for these tests, in the same forms)."""

from __future__ import annotations

import pytest

from lmms_scene.metrics.layered_vqa.grader import CANNOT_TELL, CORRECT, WRONG, answer_kind, grade

CASES = [
    # -- an explicit final answer decides over an earlier clause --
    (
        "Subtract all tiny green rubber cubes. How many objects are left?",
        "3",
        "counting",
        "I see a green rubber cube at the back, and there are no tiny green rubber cubes in front. Therefore, there are 3 objects left.",
        CORRECT,
    ),
    (
        "Subtract all tiny green rubber cubes. How many objects are left?",
        "3",
        "counting",
        "Removing the cube leaves the cylinders.\nAnswer: There are 6 objects left",
        WRONG,
    ),
    (
        "Subtract all big yellow spheres. How many objects are left?",
        "6",
        "counting",
        "There are two spheres to start with.\nAnswer: There are 6 objects left",
        CORRECT,
    ),
    (
        "Is the mug to the left of the lamp?",
        "No.",
        "spatial",
        "Looking at the desk, the mug sits near the lamp. So the answer is no.",
        CORRECT,
    ),
    (
        "Is the mug to the left of the lamp?",
        "Yes.",
        "spatial",
        "Looking at the desk, the mug sits near the lamp. So the answer is no.",
        WRONG,
    ),
    (
        "Is the fence taller than the dog?",
        "No.",
        "direct ask",
        "I can't tell from this angle how tall the fence is. So the answer is (B), No.",
        CORRECT,
    ),
    (
        "Is the fence taller than the dog?",
        "Yes.",
        "direct ask",
        "I can't tell from this angle how tall the fence is. So the answer is (B), No.",
        WRONG,
    ),
    # -- negation binds to what it negates, not to the whole reply --
    (
        "Is the lawn covered with weeds?",
        "Yes.",
        "direct ask",
        "Most of the lawn is covered with weeds such as clover, which is why it does not look well kept.",
        CORRECT,
    ),
    (
        "Is the lawn covered with weeds?",
        "No.",
        "direct ask",
        "Most of the lawn is covered with weeds such as clover, which is why it does not look well kept.",
        WRONG,
    ),
    (
        "Is there a kite in the sky?",
        "No.",
        "direct ask",
        "There is no kite in the sky; the only objects up there are a few birds.",
        CORRECT,
    ),
    (
        "Is there a kite in the sky?",
        "Yes.",
        "direct ask",
        "There is no kite in the sky; the only objects up there are a few birds.",
        WRONG,
    ),
    (
        "Is the man touching the railing?",
        "Yes.",
        "direct ask",
        "The man is not touching the railing. He stands a step away from it.",
        WRONG,
    ),
    # -- no negation and no restatement is no yes --
    (
        "Are both signs the same shape?",
        "No.",
        "direct ask",
        "The upper sign is a circle, while the lower one is a diamond.",
        CANNOT_TELL,
    ),
    (
        "Is the smaller window round?",
        "No.",
        "direct ask",
        "The bigger pane is a square, whereas the little one is a hexagon.",
        CANNOT_TELL,
    ),
    # -- a yes/no question answered by a statement --
    (
        "Is the left box larger than the right box?",
        "No.",
        "direct ask",
        "Both boxes appear to be the same size.",
        CORRECT,
    ),
    (
        "Is the left box larger than the right box?",
        "Yes.",
        "direct ask",
        "Both boxes appear to be the same size.",
        WRONG,
    ),
    (
        "Are the colours of the two cars different?",
        "No.",
        "direct ask",
        "The colours of the two cars appear to be the same, a dark blue.",
        CORRECT,
    ),
    (
        "Are the colours of the two cars different?",
        "Yes.",
        "direct ask",
        "The colours of the two cars appear to be the same, a dark blue.",
        WRONG,
    ),
    (
        "Is the left tower taller than the right one?",
        "Yes.",
        "direct ask",
        "The right tower is shorter than the left one.",
        CORRECT,
    ),
    ("Is there a cat on the sofa?", "No.", "direct ask", "The sofa is empty; a cat is absent from the scene.", CORRECT),
    (
        "Is there a cat on the sofa?",
        "Yes.",
        "direct ask",
        "There is a cat curled up on the sofa next to a cushion.",
        CORRECT,
    ),
    # -- refusals are cannot_tell, never yes, no or correct --
    (
        "Did the country export more rice than wheat in 2015?",
        "Yes.",
        "direct ask",
        "I don't have specific export values for that country in the image, so I cannot compare them.",
        CANNOT_TELL,
    ),
    (
        "Did the country export more rice than wheat in 2015?",
        "No.",
        "direct ask",
        "I don't have the data to answer this.",
        CANNOT_TELL,
    ),
    (
        "Is this painting displayed in the city museum? Please answer yes or no.",
        "No.",
        "direct ask",
        "I'm sorry, I can't help with that.",
        CANNOT_TELL,
    ),
    (
        "How many ducks are in the pond?",
        "Two.",
        "counting",
        "I'm sorry, but I am unable to count the ducks from this picture.",
        CANNOT_TELL,
    ),
    # -- a transcript echo: the reply is what follows the last "Assistant:" --
    (
        "Is the singer called Ana Lopez? Please answer yes or no.",
        "Yes.",
        "direct ask",
        "User: Is the singer called Ana Lopez? Please answer yes or no. Assistant: Yes.",
        CORRECT,
    ),
    (
        "Is the singer called Ana Lopez? Please answer yes or no.",
        "No.",
        "direct ask",
        "User: Is the singer called Ana Lopez? Please answer yes or no. Assistant: Yes.",
        WRONG,
    ),
    # -- options the model lists are not its answer --
    (
        "Which food is on the plate? (A) soup (B) rice (C) bread (D) buns",
        "soup",
        "direct ask",
        "The answer is (D) buns. The plate holds small round rolls. The other choices are (A) soup, (B) rice and (C) bread.",
        WRONG,
    ),
    (
        "Which food is on the plate? (A) soup (B) rice (C) bread (D) buns",
        "buns",
        "direct ask",
        "The answer is (D) buns. The plate holds small round rolls. The other choices are (A) soup, (B) rice and (C) bread.",
        CORRECT,
    ),
    (
        "Which food is on the plate? (A) soup (B) rice (C) bread (D) buns",
        "soup",
        "direct ask",
        "Answer: (A) soup. It is a bowl of broth, not rice or bread.",
        CORRECT,
    ),
    # -- a word that is both a colour and an object is read by the question --
    ("What is to the right of the plums?", "Oranges.", "spatial", "The right of plums is oranges.", CORRECT),
    ("What is to the right of the plums?", "Oranges.", "spatial", "The right of plums is lemons.", WRONG),
    ("What colour is the ball?", "Orange.", "direct ask", "The ball is orange.", CORRECT),
    # -- a "so no ..." that is no final answer, a "doesn't have" that is no refusal, an answer sentence that commits to nothing --
    (
        "Is there a dog on the porch?",
        "Yes.",
        "direct ask",
        "Yes, there is a dog on the porch. So no cats are around.",
        CORRECT,
    ),
    ("Does the zebra have spots?", "No.", "direct ask", "The zebra doesn't have any spots, only stripes.", CORRECT),
    ("What is flying in the sky?", "A kite.", "direct ask", "The answer is not clear from the image.", CANNOT_TELL),
    # -- an option letter with its text, or alone, read by the options the question lists --
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "No.",
        "spatial",
        "(B) no\n\nThe lamp stands on the right, next to the armrest; it is not on the left of the sofa.",
        CORRECT,
    ),
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "Yes.",
        "spatial",
        "(B) no\n\nThe lamp stands on the right, next to the armrest; it is not on the left of the sofa.",
        WRONG,
    ),
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "Yes.",
        "spatial",
        "A",
        CORRECT,
    ),
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "No.",
        "spatial",
        "(A)",
        WRONG,
    ),
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "No.",
        "spatial",
        "The lamp seems to be left of the sofa from here. So the correct answer is:\n\n(B) no",
        CORRECT,
    ),
    # -- a model's special tokens; words the grader cannot read --
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "No.",
        "spatial",
        "<s> B",
        CORRECT,
    ),
    (
        "Is the lamp on the left of the sofa? Select from the following choices. (A) yes (B) no",
        "Yes.",
        "spatial",
        "はい",
        CANNOT_TELL,
    ),
]


@pytest.mark.parametrize("question,gold,qtype,reply,want", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_the_committed_answer_decides(question, gold, qtype, reply, want):
    g = grade(reply, gold, qtype, question)
    assert g.verdict == want, (g, reply)


def test_a_refusal_is_never_correct_whatever_the_gold():
    for reply in (
        "I don't have specific export values for that region.",
        "I'm sorry, I can't answer that request.",
        "It is not possible to determine this from the image.",
        "I cannot tell.",
    ):
        for gold in ("Yes.", "No."):
            assert grade(reply, gold, "direct ask", "Was the harvest larger in 2019?").verdict == CANNOT_TELL, reply


def test_colour_or_object_by_the_question():
    assert answer_kind("Oranges.", "spatial") == "object"
    assert answer_kind("Orange.", "direct ask") == "colour"
