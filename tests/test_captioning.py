"""Caption baselines behind one interface; the AC stress test collapses them."""

from __future__ import annotations

import pytest
from conftest import java_available

from lmms_scene.metrics.captioning import SCORERS, check_corpus, get, score_all
from lmms_scene.metrics.captioning.capture_style import CaptureStyle
from lmms_scene.metrics.captioning.spice_style import spice_style_f1
from lmms_scene.metrics.cesg import cesg_score
from lmms_scene.metrics.cesg.negation import strip_negation

pytestmark = pytest.mark.slow

REFS = {
    "a": ["The worker on the scaffold is not wearing a helmet. There is no guardrail."],
    "b": ["The ladder is not secured to the wall."],
    "c": ["The welder is working without gloves or goggles."],
}
AC = {k: strip_negation(v[0]) for k, v in REFS.items()}
needs_java = pytest.mark.skipif(not java_available(), reason="pycocoevalcap needs Java")


def test_every_scorer_declares_name_and_provenance():
    for name in SCORERS:
        scorer = get(name)
        assert scorer.name == name
        prov = scorer.provenance()
        assert prov["scorer"] == name and prov["lmms_scene_version"]
    assert "not Java SPICE" in get("spice_style").provenance()["implementation"]
    assert "offline default" in get("capture_style").provenance()["soft_match_note"]


def test_corpus_is_validated():
    with pytest.raises(ValueError, match="different ids"):
        check_corpus({"a": ["x"]}, {"b": "x"})
    with pytest.raises(TypeError, match=r"predictions\['a'\]"):
        check_corpus({"a": ["x"]}, {"a": None})
    with pytest.raises(ValueError, match=r"references\['a'\]"):
        check_corpus({"a": []}, {"a": "x"})
    with pytest.raises(KeyError, match="unknown caption metric"):
        get("spice")


@needs_java
def test_ac_baseline_scores_high_on_the_baselines_and_zero_on_cesg():
    scores = score_all(REFS, AC)
    assert scores["bleu4"].score > 0.4 and scores["rouge_l"].score > 0.8
    assert scores["spice_style"].score > 0.9 and scores["capture_style"].score > 0.9
    assert set(scores["bleu4"].per_item) == set(REFS)
    for k in REFS:
        s = cesg_score(AC[k], REFS[k])
        assert s["CESG"] == 0.0 and all(s[m] in (0.0, None) for m in ("F1_o", "F1_a", "F1_r"))


@needs_java
def test_identical_captions_score_top_and_empty_ones_zero():
    same = {k: v[0] for k, v in REFS.items()}
    s = score_all(REFS, same, ["bleu4", "rouge_l", "meteor_java", "meteor_nltk"])
    assert s["bleu4"].score == pytest.approx(1.0, abs=1e-6) and s["rouge_l"].score == pytest.approx(1.0)
    assert s["meteor_java"].score > 0.95 and s["meteor_nltk"].score > 0.95
    empty = {**same, "c": ""}
    s = score_all(REFS, empty, ["meteor_java", "meteor_nltk", "bleu4"])
    for name in ("meteor_java", "meteor_nltk"):
        assert s[name].per_item["c"] == 0.0 and s[name].n_empty == 1


@needs_java
def test_cider_is_corpus_level():
    from lmms_scene.metrics.captioning.coco import CiderD

    one = CiderD().score({"a": REFS["a"], "b": REFS["b"]}, {"a": AC["a"], "b": AC["b"]}).per_item["a"]
    three = CiderD().score(REFS, AC).per_item["a"]
    assert one != pytest.approx(three)  # IDF comes from the evaluated corpus


def test_spice_style_tuple_f1():
    ref = ["The worker is wearing a helmet on the scaffold."]
    assert spice_style_f1("The worker is wearing a helmet on the scaffold.", ref) == 1.0
    partial = spice_style_f1("The worker is wearing a vest.", ref)
    assert 0.0 < partial < 1.0
    assert spice_style_f1("", ref) == 0.0
    # synonyms count (WordNet): safety rail ~ guardrail
    assert spice_style_f1("There is a safety rail.", ["There is a guardrail."]) == 1.0


def test_capture_style_weights_and_averaging():
    c = CaptureStyle()
    ref = "The worker is wearing a helmet."
    assert c.score_one(ref, [ref]) == pytest.approx(1.0)
    two = c.score_one(ref, [ref, "A dog sleeps on a sofa."])
    assert 0.4 < two < 1.0  # mean over references
