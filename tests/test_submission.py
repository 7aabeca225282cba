"""Leaderboard submissions: schema validation, every refusal rule, ranking, the CLI."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from lmms_scene.metrics import rows as rows_lib
from lmms_scene.provenance import scorer
from lmms_scene.report import leaderboard
from lmms_scene.report import submission as S

# -- synthetic lmms-eval results, shaped as lmms-eval 0.7.3 writes them ----------------------


def _cell(values: dict[str, list], clusters: list[str]) -> dict:
    rows = [{"id": c, **{k: v[i] for k, v in values.items()}} for i, c in enumerate(clusters)]
    return rows_lib.cell(rows, list(values), cluster="id")


def _scores(n: int, p: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < p) for _ in range(n)]


def cooco_report(n=40, p=0.6, seed=0, empty=0, unscored=0, clip=True):
    ids = [f"img{i // 2}" for i in range(n)]
    values = {"refclipscore": [0.5 + 0.4 * s for s in _scores(n, p, seed)] if clip else [None] * n,
              "accuracy": _scores(n, p, seed + 1) if clip else [None] * n,
              "levenshtein_accuracy": _scores(n, p, seed + 2)}  # fmt: skip
    return {
        "scorer": scorer("cooco_naming", checkpoint="tiny-clip", thresholds={"accuracy_text_cosine": 0.9}),
        "overall": _cell(values, ids),
        "output_statistics": {"n": n, "n_empty": empty, "n_unscored": unscored, "empty_output_rate": empty / n},
    }


def snus_report(n=20, seed=0, empty=0):
    ids = [f"s{i}" for i in range(n)]
    values = {k: _scores(n, 0.4, seed + i) for i, k in enumerate(("CESG", "F1_o", "F1_a", "F1_r"))}
    return {
        "model": {
            "summary": _cell(values, ids),
            "counts": {"n": n, "n_scored": n, "n_empty_prediction": empty, "n_parse_failures": 0},
            "provenance": {"cesg": scorer("cesg", parser="rule", coref="rule", similarity_model=None)},
        },
        "ac": {},
    }


def vqa_report(n=60, seed=0, failed=0, judges=None):
    scenes = [f"scene{i // 6}" for i in range(n)]
    rep = {
        "n_rows": n,
        "n_failed_conversations": failed,
        "overall": _cell({"accuracy": _scores(n, 0.5, seed), "empty_output_rate": [0.0] * n}, scenes),
        "scorer": scorer("layered_vqa_rule_grader", grader="rule"),
    }
    if judges is not None:
        rep["judges"] = judges
    return rep


REPORT_KEY = {"cooco": "cooco_breakdown", "snus": "snus_report", "layered_vqa": "layered_vqa_report"}


def write_results(folder: Path, tasks: dict[str, tuple[str, dict]], *, model="qwen2_5_vl",
                  model_args="pretrained=/ckpt/Qwen2.5-VL-3B,device=cpu", limit=None, configs=None,
                  name="20260101_000000") -> Path:  # fmt: skip
    """``tasks``: task -> (benchmark, report). Returns the results JSON path."""
    folder.mkdir(parents=True, exist_ok=True)
    results, cfgs = {}, {}
    for task, (bench, report) in tasks.items():
        results[task] = {"alias": task, f"{REPORT_KEY[bench]},none": report}
        cfgs[task] = {"task": task, "dataset_path": "fmerlo/COOCO" if bench == "cooco" else "some/hub-repo",
                      "metadata": {"version": 1.0, "benchmark": bench}}  # fmt: skip
        cfgs[task].update((configs or {}).get(task, {}))
    data = {
        "results": results,
        "configs": cfgs,
        "versions": {t: 1.0 for t in tasks},
        "n-samples": {t: {"original": 40, "effective": 40} for t in tasks},
        "higher_is_better": {t: {} for t in tasks},
        "task_hashes": {t: "abc" for t in tasks},
        "config": {"model": model, "model_args": model_args, "limit": limit},
        "lmms_eval_version": "0.7.3",
    }
    path = folder / f"{name}_results.json"
    path.write_text(json.dumps(data))
    return path


def full_run(folder: Path, seed=0, **kw) -> Path:
    return write_results(folder, {
        "cooco": ("cooco", cooco_report(seed=seed)),
        "snus": ("snus", snus_report(seed=seed)),
        "layered_vqa_full": ("layered_vqa", vqa_report(seed=seed)),
    }, **kw)  # fmt: skip


def refusal(tmp_path: Path, **kw) -> list[str]:
    with pytest.raises(S.Refused) as info:
        S.build(tmp_path / "run", **kw)
    return info.value.reasons


# -- building ------------------------------------------------------------------------------


def test_build_records_model_versions_tasks_and_headline_intervals(tmp_path):
    full_run(tmp_path / "run")
    sub = S.build(tmp_path / "run")
    assert S.check(sub) == []
    assert sub["model"] == {"name": "Qwen2.5-VL-3B", "model": "qwen2_5_vl", "model_args": "pretrained=/ckpt/Qwen2.5-VL-3B,device=cpu"}
    assert sub["versions"]["lmms_eval"] == "0.7.3" and sub["versions"]["lmms_scene"]
    assert set(sub["tasks"]) == {"cooco", "snus", "layered_vqa_full"}
    task = sub["tasks"]["cooco"]
    assert task["version"] == 1.0 and task["n_samples"] == 40 and task["benchmark"] == "cooco"
    # no revision recorded: null plus a note that says so
    assert task["dataset"]["revision"] is None and "do not record" in task["dataset"]["revision_note"]
    cooco = sub["benchmarks"]["cooco"]
    assert cooco["headline"] == "cooco/refclipscore"
    cell = cooco_report()["overall"]
    metric = cooco["metrics"]["cooco/refclipscore"]
    assert metric["value"] == pytest.approx(cell["refclipscore"])
    assert metric["ci95"] == pytest.approx(cell["ci95"]["refclipscore"]) and metric["ci95"][0] < metric["ci95"][1]
    assert metric["n"] == 40
    assert cooco["provenance"]["cooco"]["checkpoint"] == "tiny-clip"
    assert cooco["failures"]["cooco"]["n_empty"] == 0
    assert sub["benchmarks"]["snus"]["headline"] == "snus/CESG"
    assert sub["benchmarks"]["layered_vqa"]["headline"] == "layered_vqa_full/accuracy"


def test_recorded_revision_is_kept(tmp_path):
    write_results(tmp_path / "run", {"cooco": ("cooco", cooco_report())},
                  configs={"cooco": {"revision": "abc123"}})  # fmt: skip
    assert S.build(tmp_path / "run")["tasks"]["cooco"]["dataset"]["revision"] == "abc123"


def test_local_data_files_are_identified_by_hash(tmp_path):
    data = tmp_path / "built" / "data" / "test.parquet"
    data.parent.mkdir(parents=True)
    data.write_bytes(b"parquet bytes")
    write_results(tmp_path / "run", {"cooco_mine": ("cooco", cooco_report())},
                  configs={"cooco_mine": {"dataset_path": "parquet", "dataset_kwargs": {"data_files": {"test": str(data)}}}})  # fmt: skip
    ds = S.build(tmp_path / "run")["tasks"]["cooco_mine"]["dataset"]
    import hashlib

    assert ds["data_files"] == [{"path": str(data), "sha256": hashlib.sha256(b"parquet bytes").hexdigest()}]
    assert "sha256" in ds["revision_note"]


# -- refusals ------------------------------------------------------------------------------


def test_refuses_a_limit_run(tmp_path):
    full_run(tmp_path / "run", limit=5)
    reasons = refusal(tmp_path)
    assert any("--limit 5" in r and r.startswith("cooco:") for r in reasons)


def test_refuses_sample_tasks(tmp_path):
    write_results(tmp_path / "run", {"cooco_sample": ("cooco", cooco_report())})
    assert any("cooco_sample: a sample split" in r for r in refusal(tmp_path))


def test_refuses_a_dataset_marked_as_sample(tmp_path):
    write_results(tmp_path / "run", {"cooco_a": ("cooco", cooco_report()), "cooco_b": ("cooco", cooco_report())},
                  configs={"cooco_a": {"metadata": {"version": 1.0, "benchmark": "cooco", "sample": True}},
                           "cooco_b": {"dataset_kwargs": {"data_files": {"test": "sample/x.parquet"}}}})  # fmt: skip
    reasons = refusal(tmp_path)
    assert any(r.startswith("cooco_a: its config marks the dataset as a sample") for r in reasons)
    assert any(r.startswith("cooco_b: reads a sample data file (sample/x.parquet)") for r in reasons)


def test_refuses_empty_outputs_over_the_threshold(tmp_path):
    write_results(tmp_path / "run", {"cooco": ("cooco", cooco_report(empty=4))})
    assert any("4 of 40 outputs are empty (10.0% > the 5.0% allowed)" in r for r in refusal(tmp_path))
    # under a looser threshold the same run is accepted, and the count is recorded
    sub = S.build(tmp_path / "run", max_empty_rate=0.2)
    assert sub["benchmarks"]["cooco"]["failures"]["cooco"]["n_empty"] == 4


def test_refuses_snus_empty_outputs(tmp_path):
    write_results(tmp_path / "run", {"snus": ("snus", snus_report(empty=5))})
    assert any(r.startswith("snus: 5 of 20 outputs are empty") for r in refusal(tmp_path))


def test_refuses_unscored_rows_and_failed_conversations(tmp_path):
    write_results(tmp_path / "run", {"cooco": ("cooco", cooco_report(unscored=1)),
                                     "layered_vqa_full": ("layered_vqa", vqa_report(failed=2))})  # fmt: skip
    reasons = refusal(tmp_path)
    assert "cooco: 1 rows could not be scored" in reasons
    assert "layered_vqa_full: 2 failed conversations" in reasons


def test_refuses_judge_failures(tmp_path):
    judges = {"rows": 60, "no_consensus": 1, "failed_calls": 3, "unparsed_replies": 0, "self_judges_excluded": []}
    write_results(tmp_path / "run", {"layered_vqa_full": ("layered_vqa", vqa_report(judges=judges))})
    assert any("3 failed judge calls, 1 rows without consensus" in r for r in refusal(tmp_path))


def test_refuses_cesg_judge_failures_counted_in_the_report(tmp_path):
    rep = snus_report()
    rep["model"]["counts"]["n_judge_failures"] = 2
    write_results(tmp_path / "run", {"snus": ("snus", rep)})
    assert "snus: 2 CESG judge failures" in refusal(tmp_path)


def test_refuses_judge_failures_in_logged_samples(tmp_path):
    path = write_results(tmp_path / "run", {"snus": ("snus", snus_report())})
    samples = path.with_name(path.name.replace("_results.json", "_samples_snus.jsonl"))
    samples.write_text(json.dumps({"doc_id": 0, "CESG": {"image_id": "s0", "judge_failures": ["a ~ b"]}}) + "\n")
    assert "snus: 1 rows record judge failures in the logged samples" in refusal(tmp_path)


def test_refuses_two_models_and_duplicate_tasks(tmp_path):
    full_run(tmp_path / "run" / "a", name="20260101_000000")
    full_run(tmp_path / "run" / "b", name="20260102_000000", model_args="pretrained=/ckpt/other")
    reasons = refusal(tmp_path)
    assert any(r.startswith("results of more than one model") for r in reasons)
    assert any(r.startswith("cooco: two results") for r in reasons)


def test_refuses_an_uncomputed_headline(tmp_path):
    write_results(tmp_path / "run", {"cooco": ("cooco", cooco_report(clip=False))})
    assert any("headline metric cooco/refclipscore was not computed" in r for r in refusal(tmp_path))


def test_refuses_missing_report_and_no_results(tmp_path):
    write_results(tmp_path / "run", {"cooco": ("cooco", {"overall": None})})
    assert any("its cooco_breakdown has no overall cell" in r for r in refusal(tmp_path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(S.Refused, match="no lmms-scene task results"):
        S.build(tmp_path / "empty")


def test_refusal_lists_every_reason_at_once(tmp_path):
    write_results(tmp_path / "run", {"cooco_sample": ("cooco", cooco_report(empty=10))}, limit=3)
    reasons = refusal(tmp_path)
    assert len(reasons) >= 3


# -- the schema ------------------------------------------------------------------------------


@pytest.fixture()
def valid(tmp_path):
    full_run(tmp_path / "run")
    return S.build(tmp_path / "run")


def test_schema_file_is_versioned_and_shipped():
    sch = S.schema()
    assert sch["properties"]["schema_version"] == {"const": S.SCHEMA_VERSION}
    assert sch["properties"]["format"] == {"const": S.FORMAT}


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda s: s.pop("model"), "$: missing required field 'model'"),
        (lambda s: s.update(schema_version=2), "$.schema_version: expected 1, got 2"),
        (lambda s: s.update(extra=1), "$: unknown field 'extra'"),
        (lambda s: s["model"].update(name=""), "$.model.name: expected at least 1 characters"),
        (lambda s: s["tasks"]["cooco"].update(n_samples=-1), "$.tasks.cooco.n_samples: expected >= 0, got -1"),
        (lambda s: s["benchmarks"]["cooco"]["metrics"]["cooco/refclipscore"].update(ci95=[0.1]),
         "$.benchmarks.cooco.metrics.cooco/refclipscore.ci95: matches none of the allowed forms"),
        (lambda s: s["benchmarks"]["cooco"]["metrics"]["cooco/refclipscore"].update(value="0.5"),
         "$.benchmarks.cooco.metrics.cooco/refclipscore.value: expected number, got str"),
        (lambda s: s["benchmarks"]["cooco"].update(headline="cooco/nothing"),
         "$.benchmarks.cooco.headline: 'cooco/nothing' is not one of its metrics"),
        (lambda s: s["benchmarks"]["cooco"].update(headline="no-slash"), "does not match the pattern"),
        (lambda s: s["benchmarks"]["cooco"]["metrics"]["cooco/refclipscore"].update(ci95=[0.9, 0.1]),
         "lower bound 0.9 above upper bound 0.1"),
        (lambda s: s["tasks"].pop("cooco"), "'cooco' is not in $.tasks"),
        (lambda s: s.update(created="yesterday"), "$.created: 'yesterday' does not match"),
    ],
)
def test_invalid_submissions_are_named(valid, mutate, expected):
    broken = copy.deepcopy(valid)
    mutate(broken)
    errors = S.check(broken)
    assert any(expected in e for e in errors), errors


def test_validator_rejects_unknown_schema_keywords():
    with pytest.raises(ValueError, match="unsupported keywords"):
        S.validate(1, {"type": "integer", "multipleOf": 2})


def test_read_reports_bad_files(tmp_path, valid):
    (tmp_path / "bad.json").write_text("{not json")
    assert S.read(tmp_path / "bad.json")[1][0].startswith("not JSON (line 1")
    future = dict(valid, schema_version=2)
    (tmp_path / "future.json").write_text(json.dumps(future))
    assert "this lmms-scene reads version 1" in S.read(tmp_path / "future.json")[1][0]
    S.write(valid, tmp_path / "ok.json")
    assert S.read(tmp_path / "ok.json")[1] == []


# -- the leaderboard -------------------------------------------------------------------------


def _submission(tmp_path, name, model_args, refclip, seed=0):
    full_run(tmp_path / name, model_args=model_args, seed=seed)
    sub = S.build(tmp_path / name)
    sub["benchmarks"]["cooco"]["metrics"]["cooco/refclipscore"]["value"] = refclip
    return sub


def test_leaderboard_ranks_validates_and_renders(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, value in (("a", 0.5), ("b", 0.8), ("c", 0.5)):
        S.write(_submission(tmp_path, name, f"pretrained=/m/model_{name}", value), subs / f"{name}.json")
    (subs / "broken.json").write_text(json.dumps({"format": S.FORMAT, "schema_version": 1}))
    board = leaderboard.build(subs)
    order = [(e.model, e.rank) for e in board.ranked["cooco"]]
    assert order == [("model_b", 1), ("model_a", 2), ("model_c", 2)]  # equal values share a rank
    assert [f for f, _ in board.invalid] == ["broken.json"]
    assert any("missing required field 'model'" in r for r in board.invalid[0][1])
    md = leaderboard.write(board, tmp_path / "lb.md").read_text()
    assert "## COOCO" in md and "## SNUS" in md and "## Layered-VQA" in md
    assert "| 1 | model_b" in md and "broken.json" in md
    assert "0.800 [" in md  # intervals shown
    page = leaderboard.write(board, tmp_path / "lb.html").read_text()
    assert page.startswith("<!doctype html>") and "<td>model_b (pretrained=/m/model_b)</td>" in page
    assert "http" not in page  # loads nothing
    with pytest.raises(ValueError, match="should end in .md or .html"):
        leaderboard.write(board, tmp_path / "lb.txt")


def test_leaderboard_keeps_incomparable_headlines_apart(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a", "b"):
        S.write(_submission(tmp_path, name, f"pretrained=/m/{name}", 0.5), subs / f"{name}.json")
    write_results(tmp_path / "c", {"layered_vqa_concat_q": ("layered_vqa", vqa_report())}, model_args="pretrained=/m/c")
    S.write(S.build(tmp_path / "c"), subs / "c.json")
    board = leaderboard.build(subs)
    assert [e.model for e in board.ranked["layered_vqa"]] == ["a", "b"]
    assert board.apart["layered_vqa"][0][0] == "c.json"


def test_leaderboard_notes_a_model_submitted_twice(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    sub = _submission(tmp_path, "a", "pretrained=/m/a", 0.5)
    S.write(sub, subs / "first.json")
    S.write(sub, subs / "second.json")
    board = leaderboard.build(subs)
    assert [e.rank for e in board.ranked["cooco"]] == [1, 1]
    assert "submitted 2 times (first.json, second.json)" in board.notes["cooco"][0]
    assert "- note: a (pretrained=/m/a) is submitted 2 times" in leaderboard.markdown(board)


# -- the command line ------------------------------------------------------------------------


def test_cli_submit_and_leaderboard(tmp_path, capsys):
    from lmms_scene.cli import main

    full_run(tmp_path / "run")
    assert main(["submit", str(tmp_path / "run"), "--out", str(tmp_path / "subs" / "s.json")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert S.read(tmp_path / "subs" / "s.json")[1] == []
    assert main(["leaderboard", str(tmp_path / "subs"), "--out", str(tmp_path / "lb.md")]) == 0
    assert "Qwen2.5-VL-3B" in (tmp_path / "lb.md").read_text()

    write_results(tmp_path / "sample", {"snus_sample": ("snus", snus_report())}, limit=2)
    assert main(["submit", str(tmp_path / "sample"), "--out", str(tmp_path / "no.json")]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "snus_sample: a sample split" in err and "--limit 2" in err
    assert not (tmp_path / "no.json").exists()


def test_layered_vqa_headline_is_retained_accuracy(tmp_path):
    """Layered-VQA ranks by Table 1's retained accuracy: run as one task per schedule, from
    the layered_vqa group (no task alone computes it); with no group, by accuracy."""
    path = write_results(tmp_path / "split", {"layered_vqa_full": ("layered_vqa", vqa_report()), "layered_vqa_sharded_q": ("layered_vqa", vqa_report(seed=1))})
    data = json.loads(path.read_text())
    data["results"]["layered_vqa"] = {"alias": "layered_vqa", "retained_text,none": 0.9, "retained_visual,none": 0.5, "retained_layered,none": None}
    data["group_subtasks"] = {"layered_vqa": ["layered_vqa_full", "layered_vqa_sharded_q"]}
    path.write_text(json.dumps(data))
    sub = S.build(tmp_path / "split")
    assert S.check(sub) == []
    entry = sub["benchmarks"]["layered_vqa"]
    assert entry["headline"] == "layered_vqa/retained_text" and entry["metrics"]["layered_vqa/retained_text"]["value"] == 0.9
    assert "layered_vqa/retained_layered" not in entry["metrics"]
    write_results(tmp_path / "lone", {"layered_vqa_full": ("layered_vqa", vqa_report())})
    assert S.build(tmp_path / "lone")["benchmarks"]["layered_vqa"]["headline"] == "layered_vqa_full/accuracy"
