"""SNUS data (schema, builder, sample), the blind prior, the commands and Table 2."""

from __future__ import annotations

import json

import pytest

from lmms_scene.data import snus


def test_sample_is_consistent_with_its_captions():
    rows = snus.sample_rows()
    assert len(rows) == 12 and len({r["image_id"] for r in rows}) == 12
    for r in rows:
        for obj in r["missing_objects"]:
            assert obj in r["caption"]
        for rel in r["missing_relations"]:
            assert rel["subject"] in r["caption"] and rel["object"] in r["caption"]
        for a in r["missing_attributes"]:
            assert f"The {a['object']} is not {a['attribute']}." in r["caption"]


def test_embedded_sample_matches_the_generator(tmp_path):
    import datasets

    (path,) = snus.build_sample(tmp_path)
    fresh = datasets.load_dataset("parquet", data_files={"test": str(path)}, split="test")
    shipped = datasets.load_dataset(
        "parquet", data_files={"test": str(snus.tasks_folder() / snus.SAMPLE_FILE)}, split="test"
    )
    assert fresh["caption"] == shipped["caption"] and fresh["missing_relations"] == shipped["missing_relations"]
    assert fresh.features == snus.features()


@pytest.mark.slow
def test_every_sample_reference_has_absent_information():
    from lmms_scene.metrics.cesg import cesg_score

    for r in snus.sample_rows():
        s = cesg_score(r["caption"], r["caption"])
        assert s["status"] == "scored" and s["CESG"] == pytest.approx(1.0), r["caption"]


def _release(tmp_path, records):
    from PIL import Image

    folder = tmp_path / "release"
    folder.mkdir()
    for rec in records:
        if isinstance(rec.get("image"), str) and not rec["image"].startswith("missing"):
            Image.new("RGB", (8, 8), (255, 0, 0)).save(folder / rec["image"])
    (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    return folder


def test_build_from_a_local_release(tmp_path):
    folder = _release(
        tmp_path,
        [
            {"image": "a.png", "caption": "There is no guardrail.", "missing_objects": ["guardrail"], "split": "test"},
            {
                "image": "b.png",
                "caption": "The ladder is not secured.",
                "missing_attributes": [["ladder", "secured"]],
                "split": "train",
                "missing_relations": [{"subject": "worker", "relation": "wear", "object": "helmet"}],
            },
        ],
    )
    ds = snus.build(folder)
    assert set(ds) == {"test", "train"}
    assert ds["train"][0]["missing_attributes"] == [{"object": "ladder", "attribute": "secured"}]
    assert ds["test"].features == snus.features()
    written = snus.write_local(ds, tmp_path / "out", snus.card(ds, "test release"))
    assert (tmp_path / "out" / "README.md").read_text().count("| test | 1 |") == 1
    assert all(p.is_file() for p in [*written["splits"], written["card"]]) and len(written["splits"]) == 2
    assert written["tasks"] == ["snus_out"]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"image": "missing.png", "caption": "No rail."}, "field 'image': no such file"),
        ({"image": "a.png", "caption": "  "}, "field 'caption'"),
        ({"image": "a.png", "caption": "No rail.", "missing_attributes": [["ladder"]]}, "field 'missing_attributes'"),
        ({"image": "a.png", "caption": "No rail.", "split": "dev"}, "field 'split'"),
    ],
)
def test_build_errors_name_row_and_field(tmp_path, record, message):
    folder = _release(tmp_path, [record])
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        snus.build(folder)


def test_task_reads_the_one_hub_location():
    text = (snus.tasks_folder() / "_default_template_yaml").read_text()
    assert f"dataset_path: {snus.HUB_REPO}" in text
    assert "benchmark: snus" in text
    from lmms_scene.registration import read_task_yaml

    sample = read_task_yaml(snus.tasks_folder() / "snus_sample.yaml")
    assert sample["task"] == "snus_sample"
    # the embedded sample runs anywhere (CLIP not at hand: recorded as not computed)
    assert sample["process_docs"].endswith("snus.utils.process_docs_sample")


def test_blind_prior_is_the_most_frequent_statements():
    from lmms_scene.baselines.snus import blind_answer, prior_from

    assert (
        prior_from(["There is no rail. The floor is not dry.", "There is no rail.", "There is no rail. No exit."])
        == "There is no rail. No exit."
    )  # k = median 2; ties alphabetical
    answer = blind_answer({}, "")
    assert answer == blind_answer({"image_id": "x"}, "other prompt")
    with pytest.raises(ValueError):
        prior_from(["", "  "])


@pytest.mark.slow
def test_cesg_command(tmp_path, capsys):
    from lmms_scene.cli import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "a", "prediction": "There is no guardrail.", "references": ["There is no guardrail."]},
                {"id": "b", "prediction": "There is a guardrail.", "references": "There is no guardrail."},
                {"id": "c", "prediction": "There is no vest.", "references": ["A man stands."]},
            ]
        )
    )
    assert main(["cesg", "--input", str(pairs), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["CESG"] for r in out["rows"]] == [1.0, 0.0, None]
    # the paper's convention: P_o over row a only (b claims nothing), R_o = (1 + 0) / 2
    assert out["means"]["CESG"] == pytest.approx(2 / 3) and out["n_reference_without_absent_information"] == 1
    assert out["row_counts"]["P_o"] == 1 and out["row_counts"]["R_o"] == 2
    assert out["provenance"]["parser"].startswith("lmms-scene dependency rules")
    assert main(["cesg", "--input", str(pairs)]) == 0
    assert "| a | 1.000" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "prediction": 3, "references": ["x"]}')
    assert main(["cesg", "--input", str(bad)]) == 2
    assert "line 1: field 'prediction'" in capsys.readouterr().err


@pytest.mark.slow
def test_snus_ac_command_and_table2(tmp_path, capsys):
    from conftest import java_available

    if not java_available():
        pytest.skip("pycocoevalcap needs Java")
    from lmms_scene.cli import main

    refs = tmp_path / "refs.jsonl"
    refs.write_text(
        "\n".join(
            json.dumps({"id": i, "references": [c]})
            for i, c in enumerate(
                ["The worker is not wearing a helmet. There is no guardrail.", "The ladder is not secured to the wall."]
            )
        )
    )
    assert main(["snus-ac", "--input", str(refs), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["summary"]["CESG"] == 0.0 and rep["corpus"]["bleu4"] > 0.3
    assert rep["provenance"]["spice_style"]["scorer"] == "spice_style"
    # without --json: the same Table 2 that show prints, the AC row with the JSON's numbers
    assert main(["snus-ac", "--input", str(refs)]) == 0
    printed = capsys.readouterr().out
    assert "## SNUS Table 2" in printed and "MET is NLTK's METEOR" in printed
    head = next(line for line in printed.splitlines() if line.startswith("| Method |")).strip("|").split("|")
    ac_line = next(line for line in printed.splitlines() if line.startswith("| AC (references, negation stripped) |"))
    ac_cells = dict(zip([h.strip() for h in head], [c.strip() for c in ac_line.strip("|").split("|")], strict=True))
    assert ac_cells["n"] == "2" and ac_cells["CESG"].startswith("0.00")
    assert ac_cells["BL4"] == f"{100 * rep['corpus']['bleu4']:.2f}" and float(ac_cells["BL4"]) > 30

    from lmms_scene.metrics.snus import scoring as report
    from lmms_scene.metrics.snus import tables as snus_tables
    from lmms_scene.results import TaskResult, label_runs

    rows = [
        {"image_id": "0", "output": "There is no guardrail.", "references": ["There is no guardrail."]},
        {"image_id": "1", "output": "", "references": ["The ladder is not secured."]},
    ]
    full = report.corpus_report(rows)
    result = TaskResult(
        "snus_sample", "snus", {"snus_report": {k: v for k, v in full.items()}}, {}, "scene_blind", "", tmp_path
    )
    view = snus_tables.view([result], label_runs([result])[0])
    text = view.text()
    table2, behind, outcomes = view.tables
    # every column of the paper's Table 2, the headline (CESG and its F1s) first
    assert table2.header == [
        "Method",
        "n",
        "CESG",
        "F1_o",
        "F1_a",
        "F1_r",
        "P_o",
        "R_o",
        "P_r",
        "R_r",
        "P_a",
        "R_a",
        "ROU",
        "MET",
        "CID",
        "BL4",
        "CAP*",
        "CS",
        "SPI*",
        "METEOR-J",
    ]
    assert [r[0] for r in table2.rows] == ["scene_blind (snus_sample)", "AC (references, negation stripped)"]
    # the rows behind each mean: P_o over row 0 only (row 1 is empty), R_a over row 1
    assert behind.title.startswith("SNUS: rows behind each CESG mean")
    assert behind.header == ["Method", "n", "P_o", "R_o", "P_r", "R_r", "P_a", "R_a"]
    assert behind.cells()[0] == ["scene_blind (snus_sample)", "2", "1", "1", "0", "0", "0", "1"]
    assert "| scene_blind (snus_sample) | 2 | 1 | 1 | 0 | 0 | 0 | 1 |" in text
    assert "MET is NLTK's METEOR" in text
    assert "AC (references, negation stripped)" in text and "not Java SPICE" in text
    # one empty output (scored 0), nothing left unscored
    counted = dict(zip(outcomes.header, outcomes.rows[0], strict=True))
    assert (
        counted["empty outputs"] == 1 and counted["rows"] == 2 and counted["scored"] == 2 and counted["unscored"] == 0
    )
