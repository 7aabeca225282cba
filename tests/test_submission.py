"""Leaderboard submissions that carry their evidence, and a leaderboard that trusts none
of them: every refusal rule of ``submit``, every forged file the leaderboard must refuse
(with its reason), ranking by the registry's direction, runs on different data never
ranked together, the CLI.

The runs are real results files: the embedded samples' docs scored by the tasks' own
``process_results`` and aggregations (tests/results_kit.py), with their samples files.
"""

from __future__ import annotations

import copy
import json
from importlib import metadata
from pathlib import Path

import pytest
from results_kit import cooco_items, full_run, official_fingerprints, write_run

from lmms_scene.report import leaderboard
from lmms_scene.report import submission as S

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("submission")]


@pytest.fixture(scope="module")
def items(scored_items):
    """Scored items of two "models" (two output mixes) for every benchmark, no empty outputs."""
    return scored_items


def refusal(run: Path, **kw) -> list[str]:
    with pytest.raises(S.Refused) as info:
        S.build(run, **kw)
    return info.value.reasons


# -- building ------------------------------------------------------------------------------


def test_a_submission_holds_the_registry_headline_recomputed_from_its_rows(good_submission):
    run, official, sub = good_submission
    assert S.verify(sub, official=official) == []
    assert sub["versions"]["lmms_eval"] == metadata.version("lmms-eval")
    assert sub["versions"]["lmms_scene"] and "lmms_scene_commit" in sub["versions"]
    results = json.loads(next(run.glob("*_results.json")).read_text())["results"]
    cooco = sub["benchmarks"]["cooco"]
    assert cooco["headline"] == "refclipscore" and cooco["task"] == "cooco"
    overall = results["cooco"]["cooco_breakdown,none"]["overall"]
    assert cooco["metrics"]["refclipscore"]["value"] == pytest.approx(overall["refclipscore"], abs=1e-12)
    assert cooco["metrics"]["refclipscore"]["ci95"] == pytest.approx(overall["ci95"]["refclipscore"], abs=1e-12)
    assert cooco["dataset"]["official"] and cooco["dataset"]["source"]["path"] == "fmerlo/COOCO"
    assert cooco["dataset"]["fingerprint"] == results["cooco"]["cooco_breakdown,none"]["dataset"]["fingerprint"]
    # Layered-VQA: retained accuracy from the group, recomputed from the 16 schedule tasks' rows
    vqa = sub["benchmarks"]["layered_vqa"]
    assert vqa["headline"] == "retained_text" and vqa["task"] == "layered_vqa" and len(vqa["rows"]) == 16
    for c in ("text", "visual", "layered"):
        assert vqa["metrics"][f"retained_{c}"]["value"] == pytest.approx(
            results["layered_vqa"][f"retained_{c},none"], abs=1e-12
        )
    assert vqa["metrics"]["retained_text"]["ci95"] is not None  # the rows give the interval the group lacks
    snus = sub["benchmarks"]["snus"]
    assert snus["headline"] == "CESG"
    assert snus["metrics"]["CESG"]["value"] == pytest.approx(results["snus"]["CESG,none"], abs=1e-12)


def test_refusals_name_every_reason(items, tmp_path):
    run = full_run(tmp_path / "run", items, limit=5, harness="main@f3b7498")
    reasons = refusal(run)
    assert any(r.startswith("cooco: the run used --limit 5") for r in reasons)
    assert any("lmms-eval 'main@f3b7498', not one of the tested releases" in r for r in reasons)
    assert any(
        r.startswith("snus: not the benchmark: its data (fingerprint")
        and "neither lmms-scene's registry nor --official" in r
        for r in reasons
    )
    assert any(r.startswith("layered_vqa: not the benchmark") for r in reasons)


def test_refuses_old_harnesses_sample_splits_and_runs_without_samples(items, tmp_path):
    write_run(tmp_path / "old", {"cooco": ("cooco", items[0]["cooco"])}, harness="0.3.0")
    assert any("lmms-eval '0.3.0'" in r for r in refusal(tmp_path / "old"))
    write_run(tmp_path / "sample", {"cooco_sample": ("cooco", items[0]["cooco"])})
    assert any("cooco_sample: a sample split" in r for r in refusal(tmp_path / "sample"))
    write_run(tmp_path / "nosamples", {"cooco": ("cooco", items[0]["cooco"])}, samples=False)
    assert any("no logged samples, so its numbers cannot be checked" in r for r in refusal(tmp_path / "nosamples"))


def test_refuses_results_that_disagree_with_their_samples(items, tmp_path):
    path = write_run(tmp_path / "run", {"cooco": ("cooco", items[0]["cooco"])})
    data = json.loads(path.read_text())
    data["results"]["cooco"]["cooco_breakdown,none"]["overall"]["refclipscore"] = 0.99
    path.write_text(json.dumps(data))
    assert any("refclipscore is 0.99 in the results but" in r and "disagree" in r for r in refusal(tmp_path / "run"))


def test_refuses_other_data_than_the_official_release(items, tmp_path):
    # a local rebuild of COOCO (data files, not the hub dataset), and SNUS data whose
    # fingerprint is not the registered one
    write_run(
        tmp_path / "run",
        {"cooco": ("cooco", items[0]["cooco"]), "snus": ("snus", items[0]["snus"])},
        configs={
            "cooco": {"dataset_path": "parquet", "dataset_kwargs": {"data_files": {"test": "/data/mine.parquet"}}}
        },
    )
    reasons = refusal(tmp_path / "run", official={"snus": ["0" * 64]})
    assert any(
        r.startswith("cooco: not the benchmark: its data (fingerprint") and "it says it read 'parquet'" in r
        for r in reasons
    )
    assert any(r.startswith("snus: not the benchmark: its data (fingerprint") for r in reasons)


def test_refuses_uncomputed_headlines_empty_outputs_and_judge_failures(items, tiny_clip, tmp_path):
    no_clip = cooco_items(None)  # CLIP off: no RefCLIPScore
    write_run(tmp_path / "a", {"cooco": ("cooco", no_clip)})
    reasons = refusal(tmp_path / "a")
    assert any("the headline metric refclipscore was not computed" in r for r in reasons)
    assert any("outputs are empty" in r for r in reasons)  # the pin's mix has an empty answer in six
    judged = copy.deepcopy(items[0]["snus"])
    judged[0]["CESG"]["judge_failures"] = ["timeout"]
    write_run(tmp_path / "b", {"snus": ("snus", judged)})
    assert any("rows record judge failures in the logged samples" in r for r in refusal(tmp_path / "b"))


def test_refuses_two_models_and_a_task_twice(items, tmp_path):
    write_run(tmp_path / "run" / "a", {"cooco": ("cooco", items[0]["cooco"])}, model_args="pretrained=/m/a")
    write_run(
        tmp_path / "run" / "b",
        {"cooco": ("cooco", items[1]["cooco"])},
        model_args="pretrained=/m/b",
        name="20260102_000000",
    )
    reasons = refusal(tmp_path / "run")
    assert any("results of more than one model" in r for r in reasons)
    assert any(r.startswith("cooco: two results") for r in reasons)


# -- the leaderboard refuses forged files ------------------------------------------------------


def _forge(sub, change):
    forged = copy.deepcopy(sub)
    change(forged)
    return forged


def _set(path, value):
    def change(sub):
        node = sub
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


CESG = ["benchmarks", "snus", "metrics", "CESG"]
FORGERIES = [
    ("a hand-edited value", _set([*CESG, "value"], 0.6), "does not follow from its rows"),
    (
        "an accuracy of 7.5",
        _set(["benchmarks", "layered_vqa", "metrics", "accuracy", "value"], 7.5),
        "outside its range [0, 1]",
    ),
    ("an n of 10^12", _set([*CESG, "n"], 10**12), "but its rows hold"),
    ("a value outside its own interval", _set([*CESG, "ci95"], [0.0, 0.01]), "lies outside its own interval"),
    ("a direction of its own", _set([*CESG, "higher_is_better"], False), "Additional properties are not allowed"),
    (
        "an edited row",
        lambda s: s["benchmarks"]["snus"]["rows"]["snus"]["values"][0].__setitem__(2, 0.123),
        "the rows were changed",
    ),
    ("another headline", _set(["benchmarks", "snus", "headline"], "F1_o"), "SNUS's headline is 'CESG'"),
    (
        "an edited fingerprint",
        _set(["benchmarks", "snus", "dataset", "fingerprint"], "f" * 64),
        "is not the fingerprint of its rows",
    ),
    ("an untested harness", _set(["versions", "lmms_eval"], "0.3.0"), "is not a tested lmms-eval release"),
    (
        "an unknown benchmark",
        lambda s: s["benchmarks"].__setitem__("mmmu", s["benchmarks"]["snus"]),
        "'mmmu' is not an lmms-scene benchmark",
    ),
    ("a model name with a newline", _set(["model", "name"], "x\n# injected"), "does not match"),
]


@pytest.mark.parametrize("what,change,reason", FORGERIES, ids=[f[0] for f in FORGERIES])
def test_the_leaderboard_refuses_a_forged_submission(good_submission, tmp_path, what, change, reason):
    _, official, sub = good_submission
    (tmp_path / "forged.json").write_text(json.dumps(_forge(sub, change)))
    data, problems = S.read(tmp_path / "forged.json", official=official)
    assert problems and any(reason in p for p in problems), problems


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_not_json(good_submission, tmp_path, literal):
    _, official, sub = good_submission
    text = json.dumps(sub).replace(json.dumps(sub["benchmarks"]["snus"]["metrics"]["CESG"]["value"]), literal, 1)
    (tmp_path / "nan.json").write_text(text)
    data, problems = S.read(tmp_path / "nan.json", official=official)
    assert data is None and problems == [f"not JSON ({literal} is not a finite number)"]


def test_rows_and_numbers_forged_together_still_need_official_data(good_submission, tmp_path):
    """What the check cannot see (docs/reports.md says so): consistent forged rows pass the
    recomputation; the data identity is still checked against the official release."""
    from lmms_scene.metrics.snus import tables as snus_tables

    _, official, sub = good_submission
    forged = copy.deepcopy(sub)
    entry = forged["benchmarks"]["snus"]
    payload = entry["rows"]["snus"]
    payload["values"] = payload["values"][:5]  # a 5-item run dressed up consistently
    entry["rows_sha256"]["snus"] = S.rows_sha256(payload)
    again = snus_tables.recompute(S.payload_rows(payload))
    for name, m in entry["metrics"].items():
        ci = again["cell"]["ci95"].get(name)
        m.update(value=again["cell"][name], ci95=list(ci) if ci else None, n=again["dataset"]["n_rows"])
    entry["dataset"]["fingerprint"] = again["dataset"]["fingerprint"]
    entry["dataset"]["n_rows"] = again["dataset"]["n_rows"]
    problems = S.verify(forged, official=official)
    assert problems == [
        "$.benchmarks.snus.dataset: not the benchmark: its data (fingerprint "
        f"{again['dataset']['fingerprint']}, 5 items) is not vouched for: neither lmms-scene's registry nor "
        "--official lists it; it says it read 'lmms-scene-tests/snus', which is not checked. If you know this is "
        "SNUS's data, vouch for it with --official FILE, FILE holding "
        f'{{"snus": ["{again["dataset"]["fingerprint"]}"]}}'
    ]


# -- ranking ---------------------------------------------------------------------------------


def test_leaderboard_ranks_by_the_registry_direction_and_never_mixes_data(items, good_submission, tmp_path):
    _, official, sub0 = good_submission
    subs = tmp_path / "subs"
    subs.mkdir()
    S.write(sub0, subs / "a.json")
    run1 = full_run(tmp_path / "b", items, k=1, model_args="pretrained=/m/model_b")
    S.write(S.build(run1, official=official), subs / "b.json")
    S.write(sub0, subs / "a_again.json")
    # a run on other SNUS data (first 6 images), official to this leaderboard too
    small = tmp_path / "small"
    write_run(small, {"snus": ("snus", items[1]["snus"][:6])}, model_args="pretrained=/m/small")
    other = {**official, "snus": official["snus"] + official_fingerprints(small)["snus"]}
    S.write(S.build(small, official=other), subs / "small.json")
    (subs / "broken.json").write_text(json.dumps({"format": S.FORMAT, "schema_version": 2}))
    board = leaderboard.build(subs, official=other)
    assert [f for f, _ in board.invalid] == ["broken.json"]
    snus_groups = board.groups["snus"]
    assert len(snus_groups) == 2  # two datasets: two tables, never one ranking
    big = max(snus_groups, key=lambda g: len(g.entries))
    values = [e.value for e in big.entries]
    assert values == sorted(values, reverse=True) and {e.file for e in big.entries} == {
        "a.json",
        "a_again.json",
        "b.json",
    }
    assert [e.file for e in min(snus_groups, key=lambda g: len(g.entries)).entries] == ["small.json"]
    assert any("submitted 2 times" in n for n in board.notes["snus"])
    assert any("different data" in n for n in board.notes["snus"])
    md = leaderboard.write(board, tmp_path / "lb.md").read_text()
    assert md.count("Ranked by CESG") == 2 and "broken.json" in md
    page = leaderboard.write(board, tmp_path / "lb.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "http" not in page.split("</style>", 1)[1]


def test_markdown_and_html_escape_what_a_submission_says(good_submission, tmp_path):
    _, official, sub = good_submission
    forged = copy.deepcopy(sub)
    forged["model"]["model_args"] = "pretrained=<script>alert(1)</script>|x"
    board = leaderboard.rank([("s.json", forged)])
    md = leaderboard.markdown(board)
    assert "<script>" not in md and "&lt;script&gt;" in md and "\\|x" in md
    assert "<script>" not in leaderboard.html(board)


# -- the command line ------------------------------------------------------------------------


def test_cli_submit_and_leaderboard(good_submission, tmp_path, capsys):
    from lmms_scene.cli import main

    run, official, _ = good_submission
    off = tmp_path / "official.json"
    off.write_text(json.dumps(official))
    assert main(["submit", str(run), "--out", str(tmp_path / "subs" / "s.json"), "--official", str(off)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["leaderboard", str(tmp_path / "subs"), "--out", str(tmp_path / "lb.md"), "--official", str(off)]) == 0
    assert "Qwen2.5-VL-3B" in (tmp_path / "lb.md").read_text()
    assert main(["submit", str(run), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["leaderboard", str(tmp_path / "subs"), "--out", str(tmp_path)]) == 2
    assert main(["submit", str(run), "--out", str(tmp_path / "no.json")]) == 2  # no --official: not the benchmark
    assert "not the benchmark" in capsys.readouterr().err and not (tmp_path / "no.json").exists()


def test_schema_file_is_published_and_equals_the_shipped_one():
    shipped = S.schema()
    published = json.loads((Path(__file__).parents[1] / "docs" / "submission.schema.json").read_text())
    assert shipped == published and shipped["properties"]["schema_version"]["const"] == S.SCHEMA_VERSION
