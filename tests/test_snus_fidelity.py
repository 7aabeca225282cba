"""Does CESG mean what the paper means on text written the way models write? The issue's
table, the labelled negation set, the paper's Q3-Q6, a ranking check, the paper's
corpus convention (Table 2's F1 = HM(P, R)), the baselines as pycocoevalcap's corpus
scores, and the bad inputs of every new reader path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import java_available

from lmms_scene.metrics.cesg import KEYS, cesg_graph, cesg_score, checks
from lmms_scene.metrics.cesg.negation import lexical_negation, normalise_lists, strip_negation

pytestmark = pytest.mark.slow

needs_java = pytest.mark.skipif(not java_available(), reason="pycocoevalcap needs Java")
REF = "There is no fire extinguisher."


def test_the_issues_table_reads_near_one_near_one_low():
    hedged = cesg_score("There does not appear to be a fire extinguisher.", REF)
    lexical = cesg_score("The site lacks a fire extinguisher.", REF)
    wrong = cesg_score("There is no ladder.", REF)
    assert hedged["status"] == lexical["status"] == wrong["status"] == "scored"
    assert hedged["CESG"] >= 0.95 and lexical["CESG"] >= 0.95
    assert wrong["CESG"] <= 0.3
    # the absent object keeps its head: "fire extinguisher", not "fire"
    assert [n.name for n in cesg_graph(REF).cesg.absent_objects] == ["fire extinguisher"]


def test_labelled_negation_set_agreement():
    rows = checks.read_labelled()
    assert len(rows) >= 150 and sum(r["negative"] for r in rows) >= 75 and sum(not r["negative"] for r in rows) >= 50
    kinds = {r["kind"] for r in rows}
    assert {
        "hedged",
        "epistemic",
        "lexical",
        "list",
        "un_less",
        "neither_nor",
        "none_of",
        "plain",
        "affirmative",
        "trap",
    } <= kinds
    res = checks.labelled_agreement()
    assert res["polarity_agreement"] >= 0.97, res["disagreements"]
    assert res["element_agreement"] >= 0.95, res["element_disagreements"]
    # the reader is not "everything is negative": every affirmative control and trap counts
    assert res["per_kind"]["affirmative"]["agreement"] >= 0.95 and res["per_kind"]["trap"]["agreement"] >= 0.9


@pytest.mark.parametrize("name, floor", [("snus_negation_heldout.jsonl", 0.95), ("snus_negation_heldout2.jsonl", 0.95)])
def test_held_out_negation_sets(name, floor):
    # written after the rules (docs/snus.md gives each set's first measurement)
    res = checks.labelled_agreement(Path(__file__).parent / "data" / name)
    assert res["n"] >= 30 and res["polarity_agreement"] >= floor, res["disagreements"]


def test_labelled_set_is_checked_against_what_it_says(tmp_path):
    # flipping every label must break agreement: the figure measures the reader
    path = tmp_path / "flipped.jsonl"
    path.write_text("\n".join(json.dumps({**r, "negative": not r["negative"]}) for r in checks.read_labelled()[:40]))
    assert checks.labelled_agreement(path)["polarity_agreement"] <= 0.1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": 3, "negative": true}')
    with pytest.raises(ValueError, match="line 1"):
        checks.read_labelled(bad)


@pytest.mark.parametrize(
    "text, absent",
    [
        ("There is no fire extinguisher.", ["fire extinguisher"]),
        ("The workers are not wearing hard hats.", ["hard hat"]),
        ("No first aid kits are visible.", ["first aid kit"]),
        ("The roofer is not wearing a safety harness.", ["safety harness"]),
        ("There is no guard rail and no safety net.", ["guard rail", "safety net"]),
    ],
)
def test_multi_word_objects_keep_compound_and_head(text, absent):
    assert sorted(n.name for n in cesg_graph(text).cesg.absent_objects) == sorted(absent)


def test_distinct_entities_stay_distinct_nodes():
    g = cesg_graph(
        "The worker on the scaffold is not wearing a helmet. The worker on the ground is wearing a helmet."
    ).cesg
    workers = sorted(n.description for n in g.present_nodes if n.name == "worker")
    assert workers == ["worker on ground", "worker on scaffold"]


def _example(q, label, lam=None):
    for e in checks.paper_examples():
        if e["q"] == q and e["prediction"] == label and (lam is None) == (not e["options"]):
            return e
    raise KeyError((q, label))


def test_paper_examples_q3_to_q6():
    assert _example("Q3", "same object, other description")["CESG"] == pytest.approx(1.0)
    q4, q4_loose = _example("Q4", "relation for the attribute"), _example("Q4", "relation for the attribute", lam=0.25)
    assert q4["R_a"] == 0.0 and q4_loose["R_a"] == 1.0 and q4_loose["P_r"] == 1.0  # cross-type credit above lambda only
    assert _example("Q5", "plural")["CESG"] == pytest.approx(1.0)
    right, wrong = _example("Q6", "right worker"), _example("Q6", "wrong worker")
    assert right["CESG"] >= 0.95 and wrong["F1_r"] == 0.0 and wrong["CESG"] <= right["CESG"] - 0.3


def test_a_right_answer_outscores_a_wrong_one_however_it_is_phrased():
    for row in checks.ranking():
        assert row["ranked_right"], row
        assert row["affirmative"] == 0.0
        assert all(v >= 0.6 for v in row["correct"].values()), row


# -- the paper's corpus convention ------------------------------------------------------


def test_empty_types_never_add_points_and_identical_captions_score_one():
    s = cesg_score("There is no ladder.", REF)  # wrong object, no attributes or relations anywhere
    assert s["F1_a"] is None and s["F1_r"] is None and s["CESG"] == s["F1_o"] < 0.3
    s = cesg_score("The ladder is not secured.", REF)  # a type only the prediction has scores 0
    assert s["F1_o"] == 0.0 and s["F1_a"] == 0.0 and s["CESG"] == 0.0
    same = "The worker is not wearing gloves. There is no guardrail."
    assert cesg_score(same, same)["CESG"] == 1.0


def test_corpus_f1_is_the_harmonic_mean_of_corpus_p_and_r_as_in_table_2():
    sys.path.insert(0, str(Path(__file__).parent / "golden"))
    from make_sample_golden import compute_snus

    rep = compute_snus()["snus_report"]["model"]
    s, counts = rep["summary"], rep["counts"]["cesg_rows"]
    for t in "oar":
        p, r = s[f"P_{t}"], s[f"R_{t}"]
        assert s[f"F1_{t}"] == pytest.approx(2 * p * r / (p + r), abs=1e-12)  # the paper's Table 2 consistency
        assert counts[f"R_{t}"] >= counts[f"P_{t}"] >= 1
    assert s["CESG"] == pytest.approx(0.5 * s["F1_o"] + 0.25 * s["F1_a"] + 0.25 * s["F1_r"], abs=1e-12)
    # P_t is a mean over the rows that state type t, not over every row
    rows = rep_rows = compute_snus()["rows"]
    claimed = [r["P_o"] for r in rep_rows if r["P_o"] is not None]
    assert len(claimed) == counts["P_o"] < len(rows) and s["P_o"] == pytest.approx(sum(claimed) / len(claimed))


def test_the_affirmative_caption_scores_zero_everywhere_in_the_corpus():
    from lmms_scene.metrics.cesg import score_corpus

    refs = ["The worker is not wearing gloves.", "There is no guardrail. The floor is not dry."]
    out = score_corpus([(str(i), strip_negation(r), [r]) for i, r in enumerate(refs)])
    assert all(out["means"][k] == 0.0 for k in KEYS if out["means"][k] is not None)
    assert out["means"]["CESG"] == 0.0 and out["row_counts"]["P_o"] == 0


# -- baselines on pycocoevalcap's scale --------------------------------------------------


@needs_java
def test_caption_baselines_equal_pycocoevalcap_corpus_scores_on_the_sample():
    """The task's aggregated BLEU-4 / METEOR (Java) / ROUGE-L / CIDEr-D against
    pycocoevalcap called directly on the same sample outputs (PTB tokenizer, whole split)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    sys.path.insert(0, str(Path(__file__).parent / "golden"))
    import datasets
    from make_sample_golden import REPO, compute_snus, snus_outputs

    ours = compute_snus()
    docs = datasets.load_dataset("parquet", data_files={"test": str(REPO / "tasks/snus/sample/snus_sample.parquet")})[
        "test"
    ]
    gts = {d["image_id"]: [{"caption": d["caption"]}] for d in docs}
    res = {d["image_id"]: [{"caption": snus_outputs(d, i)}] for i, d in enumerate(docs)}
    tok = PTBTokenizer()
    gts, res = tok.tokenize(gts), tok.tokenize(res)
    meteor = Meteor()
    try:
        expected = {
            "bleu4": Bleu(4).compute_score(gts, res, verbose=0)[0][3],
            "meteor_java": meteor.compute_score(gts, res)[0],
            "rouge_l": Rouge().compute_score(gts, res)[0],
            "cider": Cider().compute_score(gts, res)[0],
        }
    finally:
        meteor.meteor_p.kill()
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key
    # and the mean of per-image BLEU (the old number) is not the corpus score
    per_image = [r["bleu4"] for r in ours["rows"]]
    assert abs(sum(per_image) / len(per_image) - ours["bleu4"]) > 1e-3


def test_met_is_nltk_meteor_and_the_java_jar_is_kept_apart():
    from lmms_scene.metrics.captioning import get
    from lmms_scene.metrics.captioning.meteor_nltk import meteor_nltk, tokens

    assert tokens("The ladder isn't secured.") == ["the", "ladder", "isn", "'", "t", "secured", "."]
    assert meteor_nltk("the ladder is secured", ["the ladder is secured"]) > 0.99
    assert meteor_nltk("", ["the ladder is secured"]) == 0.0
    assert "nltk" in get("meteor_nltk").provenance()["implementation"]
    assert "jar" in get("meteor_java").provenance()["implementation"].lower()


def test_cesg_is_a_caption_scorer_like_the_baselines():
    from lmms_scene.metrics.captioning import SCORERS, get

    assert "cesg" in SCORERS
    scorer = get("cesg")
    out = scorer.score(
        {"a": [REF], "b": ["A man stands."]}, {"a": "There does not appear to be a fire extinguisher.", "b": "x"}
    )
    assert out.score == pytest.approx(1.0) and out.per_item == {"a": pytest.approx(1.0), "b": None}
    assert out.not_computed == {"b": "reference_without_absent_information"}
    assert scorer.provenance()["scorer"] == "cesg"


# -- bad input on every new reader path ----------------------------------------------------

BAD = {
    "empty": "",
    "whitespace": " \t\n  \n",
    "5000 words": " ".join(["Helmet: absent. The worker is not wearing gloves."] * 625),
    "non-English": "Der Arbeiter trägt keinen Helm. 工人没有戴安全帽。",
    "emoji": "🦺: absent\n- 🚧 none\nThere is no 🧯.",
    "HTML": "<ul><li>Helmet: <b>absent</b></li><li>no guardrail</li></ul><script>x</script>",
    "control characters": "There is no\x00 guard\x1brail.\x07\x0b Helmet:\x0c absent",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_on_the_new_reader_paths_is_a_counted_outcome(name):
    from lmms_scene.metrics.cesg import score_corpus

    text = BAD[name]
    normalised = normalise_lists(text)
    assert isinstance(normalised, str) and "\x00" not in normalised and "<" not in normalised
    for word in text.split()[:50]:
        assert lexical_negation(word) is None or lexical_negation(word)[0] in ("un", "less")
    assert isinstance(strip_negation(text), str)
    out = score_corpus([("r", text, ["There is no helmet. The worker is not wearing gloves."])])
    row = out["rows"][0]
    assert row["status"] in ("scored", "empty_prediction", "prediction_without_absent_information")
    # never a silent 0: an empty or unreadable output is counted as what it is
    counted = out["n_empty_prediction"] + out["n_prediction_without_absent_information"]
    assert (row["status"] != "scored") == (counted == 1)
    assert row["CESG"] is not None and 0.0 <= row["CESG"] <= 1.0


def test_list_normalisation_forms():
    assert normalise_lists("Helmet: absent.") == "There is no helmet."
    assert normalise_lists("- Gloves: worn\n- Vest: yes") == "There is a gloves. There is a vest."
    assert (
        normalise_lists("Missing safety items:\n- helmet\n- gloves: absent")
        == "There is no helmet. There is no gloves."
    )
    assert normalise_lists("The worker is not wearing:\n1. a hard hat") == "The worker is not wearing a hard hat."
    assert normalise_lists("Ladder: not secured") == "The ladder is not secured."
    assert (
        normalise_lists("There is no rail. The floor is wet.") == "There is no rail. The floor is wet."
    )  # prose untouched
    with pytest.raises(TypeError, match="text"):
        normalise_lists(None)  # type: ignore[arg-type]


def test_lexical_negation_lexicon():
    assert lexical_negation("unsecured") == ("un", "secure") and lexical_negation("Unguarded") == ("un", "guard")
    assert lexical_negation("helmetless") == ("less", "helmet")
    for word in ("unbearable", "unloading", "wireless", "stainless", "careless", "uniform", "unless"):
        assert lexical_negation(word) is None, word
    assert (
        strip_negation("The ladder is unsecured; the worker is helmetless.")
        == "The ladder is secured; the worker is with helmet."
    )


def test_nltk_meteor_and_the_reader_load_wordnet_themselves_from_several_threads():
    # a fresh process (or cache) must not deadlock on the WordNet reader's lock
    from concurrent.futures import ThreadPoolExecutor

    from conftest import clear_cache_keeping_jvm

    from lmms_scene.metrics.captioning.meteor_nltk import meteor_nltk

    clear_cache_keeping_jvm()  # WordNet and NLTK's METEOR reload; the METEOR JVM is not theirs
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(meteor_nltk, "the ladder is secured", ["the ladder is secured"]) for _ in range(4)]
        futures += [pool.submit(lexical_negation, w) for w in ("unsecured", "helmetless", "unguarded", "wireless")]
        results = [f.result(timeout=120) for f in futures]
    assert all(r > 0.99 for r in results[:4]) and results[4:] == [
        ("un", "secure"),
        ("less", "helmet"),
        ("un", "guard"),
        None,
    ]
