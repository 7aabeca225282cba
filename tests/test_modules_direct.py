"""One direct test for each module no other test imports by name (issue 34: every module
has a test that imports it directly; tests/test_module_map.py keeps it so). Each asserts
something the module does, on inputs written here; the modules' deeper behaviour is
tested where their benchmark or concern is (docs/architecture.md, "Modules and their
tests")."""

from __future__ import annotations

import argparse
import importlib
import io

import pytest
from PIL import Image

from lmms_scene import provenance, validation
from lmms_scene.cli import build as cli_build
from lmms_scene.cli import cooco as cli_cooco
from lmms_scene.cli import harness as cli_harness
from lmms_scene.cli import layered_vqa as cli_layered_vqa
from lmms_scene.cli import nlp as cli_nlp
from lmms_scene.cli import publish as cli_publish
from lmms_scene.cli import report as cli_report
from lmms_scene.cli import samples as cli_samples
from lmms_scene.cli import show as cli_show
from lmms_scene.cli import submit as cli_submit
from lmms_scene.data import release, samples
from lmms_scene.data.cooco import boxes as cooco_boxes
from lmms_scene.data.cooco import builder as cooco_builder
from lmms_scene.data.cooco import sample as cooco_sample
from lmms_scene.data.cooco import views as cooco_views
from lmms_scene.data.layered_vqa import card as layered_vqa_card
from lmms_scene.data.layered_vqa.sample import toy_item
from lmms_scene.data.snus import sample as snus_sample
from lmms_scene.data.snus import schema as snus_schema
from lmms_scene.data.snus import views as snus_views
from lmms_scene.metrics.captioning import base as captioning_base
from lmms_scene.metrics.captioning import cesg_scorer, tuples

# the packages re-export a function under the module's own name (``card``):
# the modules themselves
cooco_card = importlib.import_module("lmms_scene.data.cooco.card")
snus_card = importlib.import_module("lmms_scene.data.snus.card")


# -- cli: each command module registers its own commands ------------------------------------


@pytest.mark.parametrize(
    ("module", "commands", "builds"),
    [
        (cli_build, {"build"}, set()),
        (cli_cooco, set(), {"cooco"}),
        (cli_harness, {"tasks-path", "eval", "demo", "rescore"}, set()),
        (cli_layered_vqa, {"layered-vqa"}, {"layered-vqa", "layered-synth"}),
        (cli_nlp, {"install-nlp-data"}, set()),
        (cli_publish, {"publish"}, set()),
        (cli_report, {"report"}, set()),
        (cli_samples, {"build-samples"}, set()),
        (cli_show, {"show"}, set()),
        (cli_submit, {"submit", "leaderboard"}, set()),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_each_cli_module_registers_its_commands(module, commands, builds):
    sub = argparse.ArgumentParser().add_subparsers()
    if hasattr(module, "register"):
        module.register(sub)
    assert set(sub.choices) == commands
    build_sub = argparse.ArgumentParser().add_subparsers()
    if hasattr(module, "register_build"):
        module.register_build(build_sub)
    assert set(build_sub.choices) == builds
    for name in builds:  # every build has its handler
        assert callable(build_sub.choices[name].get_default("fn"))


def test_show_reads_the_terminal_width_or_falls_back(monkeypatch):
    monkeypatch.setenv("COLUMNS", "97")
    assert cli_show.terminal_width() == 97


# -- core ------------------------------------------------------------------------------------


def test_validation_wraps_a_lone_text_and_names_bad_arguments():
    assert validation.texts("one caption", "predictions") == ["one caption"]
    assert validation.reference_lists(["a", ["b", "c"]], "references") == [["a"], ["b", "c"]]
    with pytest.raises(ValueError, match="n_boot: expected an integer >= 1, got 0"):
        validation.non_negative_int(0, "n_boot", minimum=1)
    with pytest.raises(ValueError, match="lengths differ"):
        validation.same_length(predictions=["a"], references=["a", "b"])


def test_provenance_records_the_scorer_and_versions():
    record = provenance.scorer("probe", checkpoint="ckpt", thresholds={"t": 0.5}, libraries=("numpy",))
    assert (record["scorer"], record["checkpoint"], record["thresholds"]) == ("probe", "ckpt", {"t": 0.5})
    assert provenance.library_version("numpy") == __import__("numpy").__version__
    assert provenance.library_version("no-such-distribution-xyz") is None


# -- data ------------------------------------------------------------------------------------


def test_release_confines_paths_and_refuses_a_cut_image(tmp_path):
    with pytest.raises(ValueError, match=r"row 3: field 'image': '/etc/passwd' is an absolute path"):
        release.inside(tmp_path, "/etc/passwd", "row 3", "image")
    with pytest.raises(ValueError, match=r"'\.\.'|outside|leaves"):
        release.inside(tmp_path, "../x.png", "row 4", "image")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), "red").save(buffer, "JPEG")
    assert release.decode_image(buffer.getvalue(), "a.jpg").size == (8, 6)
    with pytest.raises(ValueError, match="a.jpg cannot be decoded in full"):
        release.decode_image(buffer.getvalue()[: len(buffer.getvalue()) // 2], "a.jpg")


def test_samples_knows_every_benchmark_with_a_sample_builder():
    assert set(samples.builders()) == {"cooco", "snus", "layered_vqa"}
    with pytest.raises(KeyError, match="unknown benchmark 'no-such-benchmark'"):
        samples.build_samples(["no-such-benchmark"])


def test_cooco_boxes_and_views():
    assert cooco_boxes.box_problem([0, 0, 10, 10], (20, 20), False) is None
    assert "zero or negative area" in cooco_boxes.box_problem([0, 0, -1, 10], (20, 20), False)
    assert cooco_boxes.box_formats("xyxy")["low"] == "xyxy"
    side, box = cooco_views.padded_geometry({"width": 40, "height": 20, "target_bbox": [1, 2, 3, 4]})
    assert side == 40 and box == (1.0, 12.0, 3.0, 4.0)  # padded onto a square, centred vertically
    assert cooco_views.gold_of({"condition": "clean", "target": "cup", "gold_label": ""}) == "cup"


def test_cooco_sample_card_and_local_build_names(tmp_path):
    rows = cooco_sample.sample_rows()
    assert len(rows) == 36 and {r["rel_level"] for r in rows} >= {"original", "clean", "relscore_high"}
    dataset = cooco_builder.build_dataset(rows, list(rows[0]))
    card = cooco_card.card(dataset, "a folder written for this test")
    assert "a folder written for this test" in card and "36" in card
    configs = cooco_builder.local_task_configs(tmp_path, "mine")
    assert configs and all(name.endswith("_mine") for name in configs)


def test_snus_schema_sample_views_and_card():
    assert snus_schema.SPLITS == ("train", "validation", "test")
    assert set(snus_schema.features()) == set(snus_schema.FIELDS)
    rows = snus_sample.sample_rows(3, seed=0)
    assert len(rows) == 3 and rows == snus_sample.sample_rows(3, seed=0)  # seeded
    assert snus_views.negative_statements(["There is no cone. The exit is not marked."]) == [
        "There is no cone.",
        "The exit is not marked.",
    ]
    card = snus_card.card({"test": rows}, "rows written for this test")
    assert "rows written for this test" in card and "| test | 3 |" in card


def test_layered_vqa_card_states_its_source_and_tolerance():
    items = [toy_item(n_layers=3), toy_item(n_layers=2)]
    text = layered_vqa_card.card(items, source="a generator run", max_difference=3, tolerance=2)
    assert "- Source: a generator run" in text
    assert "max pixel difference 3 (tolerance 2)" in text and "license: other" in text


# -- captioning ------------------------------------------------------------------------------


def test_captioning_interface_checks_ids_and_averages_items():
    with pytest.raises(ValueError, match=r"only in references \['a'\], only in predictions \['b'\]"):
        captioning_base.check_corpus({"a": ["x"]}, {"b": "y"})
    score = captioning_base.mean_over_items(
        "probe", lambda p, refs: float(p in refs), {"a": ["x"], "b": ["y"]}, {"a": "x", "b": "z"}, {"scorer": "probe"}
    )
    assert (score.name, score.score, score.per_item) == ("probe", 0.5, {"a": 1.0, "b": 0.0})


def test_cesg_scorer_and_tuples_say_what_they_are():
    scorer = cesg_scorer.CesgScorer(lambda_=0.6)
    assert scorer.name == "cesg" and scorer.options == {"lambda_": 0.6}
    assert "spaCy" in tuples.parser_provenance()["parser"]


# -- judges' verdicts ------------------------------------------------------------------------


def test_the_verdict_parser_is_strict_and_judges_reach_it():
    from lmms_scene import judges, verdicts

    assert verdicts.parse_verdict("Yes, the answers agree.") is True
    assert verdicts.parse_verdict("Not correct.") is False
    assert verdicts.parse_verdict("Probably yes, I think.") is None  # a hedge is no verdict
    assert judges.parse_verdict is verdicts.parse_verdict  # the one parser, also by its old path


# -- reading a journal back ------------------------------------------------------------------


def test_journal_reader_finds_journals_and_refuses_a_broken_checksum(tmp_path):
    from lmms_scene import journal, journal_read

    assert journal_read.journal_files(tmp_path) == []
    folder = tmp_path / journal_read.FOLDER
    folder.mkdir()
    path = folder / "run.jsonl"
    path.write_text('{"kind": "header", "journal_version": 2, "sum": "' + "0" * 64 + '"}\n')
    assert journal_read.journal_files(tmp_path) == [path]
    with pytest.raises(journal_read.JournalRefused, match=r"run\.jsonl line 1: the checksum does not match"):
        journal_read.read([path])
    assert journal.read is journal_read.read  # the writer's module still reaches the reader


# -- COOCO's two readings --------------------------------------------------------------------


def test_cooco_readings_of_an_answer():
    from lmms_scene.metrics.cooco import readings, scoring

    assert readings.normalise_output("  A Laptop.<|im_end|> and more") == "laptop"
    assert readings.authors_output("  An Apple.") == "apple."  # the authors keep the full stop
    assert readings.gold_name("bat (sports)") == "bat"
    assert readings.long_form("owl") == "A photo depicts an owl"
    with pytest.raises(ValueError, match="COOCO reading 'raw'"):
        readings.reading_of("raw")
    assert scoring.normalise_output is readings.normalise_output  # reachable where scoring is used


# -- CESG's rule parser: its word lists and token tests ------------------------------------------


def test_cesg_lexicon_holds_the_closed_word_lists_the_rules_read():
    from lmms_scene.metrics.cesg import lexicon

    assert {"no", "neither"} == lexicon._NEG_DET
    assert "missing" in lexicon._ABSENT_ADJ and "lack" in lexicon._LACK
    # "neither of X" stands for X: a negating determiner that is also a quantifier
    assert "neither" in lexicon._QUANT_OF and "none" in lexicon._QUANT_OF
    assert "photo" in lexicon._DEPICTIONS and "photo" not in lexicon._PERSON_WORDS


@pytest.mark.slow
def test_cesg_token_tests_read_a_negated_determiner_and_a_quantifier():
    from lmms_scene.metrics.cesg import tokens
    from lmms_scene.nlp.spacy_model import spacy_pipeline

    nlp = spacy_pipeline(merge_compounds=True)
    by_word = {t.lower_: t for t in nlp("There is no helmet near the worker.")}
    assert tokens._det_no(by_word["helmet"]) and not tokens._det_no(by_word["worker"])
    by_word = {t.lower_: t for t in nlp("None of the workers wears a vest.")}
    assert tokens._is_quantifier(by_word["none"]) and not tokens._is_quantifier(by_word["vest"])


# -- reading a submission file ---------------------------------------------------------------


def test_submission_file_reader_refuses_duplicate_keys_deep_nesting_and_long_numbers(tmp_path):
    from lmms_scene.report import submission_file

    ok = tmp_path / "ok.json"
    ok.write_text('{"a": [1, 2.5]}')
    assert submission_file.load_file(ok) == ({"a": [1, 2.5]}, [])
    dup = tmp_path / "dup.json"
    dup.write_text('{"a": 1, "a": 2}')
    data, why = submission_file.load_file(dup)
    assert data is None and "'a'" in why[0]
    deep = tmp_path / "deep.json"
    deep.write_text("[" * (submission_file.MAX_DEPTH + 5) + "]" * (submission_file.MAX_DEPTH + 5))
    assert submission_file.load_file(deep)[0] is None
    digits = tmp_path / "digits.json"
    digits.write_text("1" * (submission_file.MAX_DIGITS + 1))
    assert submission_file.load_file(digits)[0] is None
    assert submission_file.load_file(tmp_path)[0] is None  # a folder is refused, never opened


def test_the_demo_lists_the_official_hint_first_then_benchmarks_then_tasks():
    from lmms_scene.evaluate import newcomer_order

    reasons = [
        "cooco_sample: a sample split (COOCO's embedded sample), not the benchmark",
        "snus_sample: a sample split (SNUS's embedded sample), not the benchmark",
        "cooco: the headline metric refclipscore was not computed",
        "cooco: not the benchmark: ... vouch for it with --official FILE",
        "snus: not the benchmark: ... vouch for it with --official FILE",
    ]
    assert newcomer_order(reasons) == [reasons[3], reasons[4], reasons[2], reasons[0], reasons[1]]
