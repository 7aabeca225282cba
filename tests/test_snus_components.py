"""The paper's components inside the harness task: one setting (LMMS_SCENE_CESG) chooses
coref, parser, similarity model, lambda, weights and extra matching, resolved before the
model runs and recorded in the provenance; DiscoSG behind the parser stage interface;
per-row scores saved in every row (so in the samples file)."""

from __future__ import annotations

import sys
import types

import pytest
from conftest import clear_cache_keeping_models, java_available
from test_cesg import tiny_t5  # noqa: F401  (the tiny random T5 fixture)

from lmms_scene import settings
from lmms_scene.metrics.cesg import cesg_score
from lmms_scene.metrics.cesg.score import parse_components
from lmms_scene.metrics.snus import scoring as report
from lmms_scene.nlp import MissingNLPComponent

pytestmark = pytest.mark.slow

needs_java = pytest.mark.skipif(not java_available(), reason="pycocoevalcap needs Java")


def test_components_setting_is_parsed_with_errors_naming_the_key():
    opts = parse_components("coref=rule; parser=rule; encoder=none; lambda=0.7; weights=1,0,0; synonyms=off")
    assert opts == {
        "coref": "rule",
        "parser": "rule",
        "encoder": None,
        "lambda_": 0.7,
        "weights": (1.0, 0.0, 0.0),
        "synonyms": False,
    }
    assert parse_components("") == {} and parse_components(None) == {}
    for bad, message in [
        ("lamda=0.7", "key one of"),
        ("lambda=high", "lambda='high'"),
        ("weights=1,x", "weights"),
        ("soft=maybe", "on or off"),
        ("parser", "key=value"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_components(bad)
    extra = parse_components("extra=j=some-model@http://127.0.0.1:9/v1")["extra_judge"]
    assert extra.for_reference("There is no rail.").reference == "There is no rail."


def test_components_are_read_by_the_settings_reader():
    """One reader of LMMS_SCENE_CESG's pairs (settings.cesg_fields): the same keys, and its
    rules (a key given twice is refused, naming it) hold for parse_components too."""
    from lmms_scene import settings
    from lmms_scene.metrics.cesg.score import COMPONENT_KEYS

    assert set(COMPONENT_KEYS) == set(settings.CESG_KEYS)
    with pytest.raises(ValueError, match="coref is given twice"):
        parse_components("coref=rule;coref=lingmess")


@needs_java
def test_the_task_uses_the_setting_and_records_it():
    rows = [
        {"image_id": "a", "output": "The worker lacks gloves.", "references": ["The worker is not wearing gloves."]}
    ]
    with settings.override(cesg="lambda=0.7;weights=1,0,0"):
        prov = report.preflight(clip_metrics=False)
        assert prov["interactive_lambda"] == 0.7 and prov["weights"] == {"w_o": 1.0, "w_a": 0.0, "w_r": 0.0}
        rep = report.corpus_report(rows)
    assert rep["model"]["provenance"]["cesg"]["interactive_lambda"] == 0.7
    assert rep["model"]["summary"]["CESG"] == pytest.approx(rep["model"]["summary"]["F1_o"])  # weights (1, 0, 0)
    default = report.corpus_report(rows)
    assert default["model"]["provenance"]["cesg"]["interactive_lambda"] == 0.6


def test_a_missing_discosg_stops_the_task_before_generation(monkeypatch):
    monkeypatch.setitem(sys.modules, "discosg", None)  # not installed
    monkeypatch.setitem(sys.modules, "discosg.parser", None)
    monkeypatch.setitem(sys.modules, "discosg.parser.DualTaskSceneGraphParser", None)
    with settings.override(cesg="parser=discosg"):
        with pytest.raises(MissingNLPComponent, match="--no-deps discosg"):
            report.preflight(clip_metrics=False)


def _fake_discosg(monkeypatch, behaviour):
    pkg = types.ModuleType("discosg")
    sub = types.ModuleType("discosg.parser")
    mod = types.ModuleType("discosg.parser.DualTaskSceneGraphParser")
    mod.DualTaskSceneGraphParser = behaviour
    for name, m in (("discosg", pkg), ("discosg.parser", sub), ("discosg.parser.DualTaskSceneGraphParser", mod)):
        monkeypatch.setitem(sys.modules, name, m)


def test_absent_discosg_weights_fail_with_instructions(monkeypatch, tiny_t5):  # noqa: F811
    from lmms_scene.metrics.cesg.model_parsers import DiscoSGParser

    class NoWeights:
        def __init__(self, model_path, **kwargs):
            raise OSError(f"{model_path} is not a local folder and the hub cannot be reached")

    _fake_discosg(monkeypatch, NoWeights)
    with pytest.raises(MissingNLPComponent, match="hf download"):
        DiscoSGParser(model="offline/discosg-refiner", initial=str(tiny_t5), device="cpu")


def test_discosg_refines_initial_graphs_behind_the_stage_interface(monkeypatch, tiny_t5):  # noqa: F811
    from lmms_scene.metrics.cesg.construct import Pipeline, default_pipeline
    from lmms_scene.metrics.cesg.model_parsers import DiscoSGParser

    calls = []

    class Refiner:
        def __init__(self, model_path, **kwargs):
            self.model_path = model_path

        def parse(self, descriptions, graph_to_fix, batch_size, task):
            calls.append((list(descriptions), task))
            # the refiner's output format: FACTUAL-style triples per sentence
            out = {d: ("( worker , wear , helmet )" if "helmet" in d else "( floor )") for d in descriptions}
            out.update({d: "( worker , not wear , helmet )" for d in descriptions if "not" in d})
            return {"delete": dict(graph_to_fix), "insert": out}

    _fake_discosg(monkeypatch, Refiner)
    parser = DiscoSGParser(model="local/discosg", initial=str(tiny_t5), device="cpu")
    base = default_pipeline()
    pipe = Pipeline(base.coref, base.strip, base.split, parser)
    g = pipe.construct("The worker is not wearing a helmet.").cesg
    assert calls and calls[0][1] == "delete_before_insert"
    # stage V: the affirmative graph's relation the negative one lacks is negated
    assert [(r.subject.name, r.predicate, r.object.name) for r in g.negated_relations] == [("worker", "wear", "helmet")]
    assert parser.provenance()["parser"].startswith("DiscoSG-Refiner (local/discosg")
    s = cesg_score("The worker is not wearing a helmet.", "The worker is not wearing a helmet.", pipeline=pipe)
    assert s["status"] == "scored" and s["CESG"] == 1.0


@needs_java
def test_every_row_carries_its_scores():
    import datasets

    from lmms_scene.data.snus import SAMPLE_FILE, tasks_folder
    from lmms_scene.tasks.snus import utils

    clear_cache_keeping_models()
    docs = list(datasets.load_dataset("parquet", data_files={"test": str(tasks_folder() / SAMPLE_FILE)}, split="test"))[
        :3
    ]
    answers = [docs[0]["caption"], "There is no ladder.", ""]
    with settings.override(clip_model="none"):
        alone = utils.process_results(docs[1], [answers[1]])["CESG"]["scores"]
        assert alone["CESG"] is not None and alone["bleu4"] is None and "CESG only" in alone["row_scores_from"]
        assert utils.prescore(list(zip(docs, answers))) == 3
        rows = [utils.process_results(d, [a])["CESG"] for d, a in zip(docs, answers)]
    first, wrong, empty = (r["scores"] for r in rows)
    assert first["CESG"] == 1.0 and first["bleu4"] > 0.99 and first["row_scores_from"] == "batch of 3 rows"
    assert wrong["CESG"] == alone["CESG"] and wrong["meteor_nltk"] is not None
    assert empty["status"] == "empty_prediction" and empty["CESG"] == 0.0


@needs_java
def test_agreement_from_a_samples_file_without_rescoring(tmp_path, capsys):
    import json

    import datasets

    from lmms_scene.cli import main
    from lmms_scene.data.snus import SAMPLE_FILE, tasks_folder
    from lmms_scene.tasks.snus import utils

    clear_cache_keeping_models()
    docs = list(datasets.load_dataset("parquet", data_files={"test": str(tasks_folder() / SAMPLE_FILE)}, split="test"))[
        :6
    ]
    answers = [d["caption"] if i % 2 == 0 else "There is no ladder." for i, d in enumerate(docs)]
    with settings.override(clip_model="none"):
        utils.prescore(list(zip(docs, answers)))
        records = [{"doc_id": i, **utils.process_results(d, [a])} for i, (d, a) in enumerate(zip(docs, answers))]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(r, default=str) for r in records))
    flat = report.samples_rows(samples)
    assert [r["CESG"] for r in flat] == [records[i]["CESG"]["scores"]["CESG"] for i in range(6)]
    judges = tmp_path / "judges.jsonl"
    judges.write_text(
        "\n".join(json.dumps({"image_id": d["image_id"], "human": 8 if i % 2 == 0 else 2}) for i, d in enumerate(docs))
    )
    assert (
        main(
            ["agreement", "--input", str(samples), "--judges", str(judges), "--metrics", "CESG,bleu4", "--n-boot", "20"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "goodman_kruskal_gamma" in out and "| CESG | 6 | 0 |" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": 0, "x": 1}')
    with pytest.raises(ValueError, match="line 1"):
        report.samples_rows(bad)
