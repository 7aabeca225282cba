"""Faithful replays and the generation journal, without the harness running a model
(issue 16, items 5 and 6; the end-to-end runs are in tests/test_faults_e2e.py).

* ``rescore`` carries over every run option that changes numbers and refuses, with the
  reason, what it cannot carry over.
* ``scene_from_samples`` replays the k-th logged answer to the k-th copy of a request
  (the harness asks for ``--repeats`` as copies).
* The journal hands the model its requests in chunks, records each chunk's outputs with
  their requests as they arrive, and records an interruption; a journal cut by a kill
  reads back with the cut line reported and the longest complete prefix planned.
"""

from __future__ import annotations

import json
import signal
from argparse import Namespace
from pathlib import Path

import pytest
from lmms_eval.api.instance import Instance

from lmms_scene import evaluate
from lmms_scene import journal as J
from lmms_scene.models.from_samples import SceneFromSamples, logged_repeats, run_options

TAGS = '[["<think>", "</think>"], ["<analysis>", "</analysis>"]]'


def _results(path: Path, leaf: dict[str, int], **cli) -> Path:
    tasks = leaf
    resolved = {
        "tasks": ",".join(tasks),
        "repeats": max(tasks.values()),
        "reasoning_tags": TAGS,
        "include_path": None,
        "seed": [0, 1234, 1234, 1234],
        "limit": 4.0,
        "offset": 0,
        **cli,
    }
    data = {
        "results": {t: {"accuracy,none": 0.5} for t in tasks},
        "configs": {t: {"repeats": r, "metadata": {"benchmark": "layered_vqa"}} for t, r in tasks.items()},
        "config": {
            "model": "m",
            "model_args": "",
            "limit": resolved["limit"],
            "offset": resolved["offset"],
            "resolved_cli_args": resolved,
        },
    }
    path.write_text(json.dumps(data))
    return path


def _samples(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_run_options_carry_every_option_that_changes_numbers(tmp_path):
    include = tmp_path / "tasks"
    include.mkdir()
    results = _results(
        tmp_path / "20260101_120000_results.json",
        {"layered_vqa_full": 3, "layered_vqa_oracle": 3},
        tasks="layered_vqa",
        reasoning_tags="none",
        include_path=str(include),
        limit=4.0,
        offset=2,
    )
    opts = run_options(results)
    args = opts.harness_args()
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs == {
        "--tasks": "layered_vqa",
        "--limit": "4.0",
        "--offset": "2",
        "--repeats": "3",
        "--reasoning_tags": "none",
        "--include_path": str(include),
        "--seed": "0,1234,1234,1234",
    }
    assert opts.repeats_of("layered_vqa_full") == 3 and not opts.reasoning_active("layered_vqa_full")
    # a partial replay of one task: its own limit, the run's other options
    part = dict(zip(*[iter(opts.harness_args(tasks="layered_vqa_full", limit=2))] * 2))
    assert part["--tasks"] == "layered_vqa_full" and part["--limit"] == "2" and part["--repeats"] == "3"


def test_logged_repeats_in_every_shape_the_harness_logs():
    kept = {"filtered_resps": "{'lmms_scene_repeats': [['a', 'b'], ['c', 'd']]}"}
    assert logged_repeats(kept, 2) == ([["a", "b"], ["c", "d"]], True)
    assert logged_repeats(kept, 3) == ([["a", "b"], ["c", "d"]], False)
    # take_first, reasoning tags on (lmms-eval's default): only the first is logged
    assert logged_repeats({"filtered_resps": "oven"}, 2, True) == (["oven"], False)
    # tags off: resps holds the raw answers, one per repeat
    assert logged_repeats({"resps": ["oven", "stove"], "filtered_resps": "oven"}, 2, False) == (["oven", "stove"], True)
    assert logged_repeats({"resps": [" oven\n"], "filtered_resps": "oven"}, 1) == ([" oven\n"], True)


def _request(task: str, doc_id: int, repeats: int, request_type: str = "generate_until") -> Instance:
    args = ("prompt", {"max_new_tokens": 4}, None, doc_id, task, "test")
    return Instance(request_type, args, 0, metadata={"task": task, "doc_id": doc_id, "repeats": repeats})


def test_every_repeat_is_replayed_as_logged(tmp_path):
    _results(tmp_path / "20260101_120000_results.json", {"layered_vqa_sample": 2, "cooco_sample": 2})
    _samples(
        tmp_path / "20260101_120000_samples_layered_vqa_sample.jsonl",
        [{"doc_id": 0, "filtered_resps": "{'lmms_scene_repeats': [['A square.'], ['A triangle.']]}"}],
    )
    _samples(tmp_path / "20260101_120000_samples_cooco_sample.jsonl", [{"doc_id": 0, "filtered_resps": "oven"}])
    model = SceneFromSamples(samples=str(tmp_path))
    req = _request("layered_vqa_sample", 0, 2, "generate_until_multi_round")
    # the harness sends the same request once per repeat, one after the other
    assert model.generate_until_multi_round([req, req]) == [["A square."], ["A triangle."]]
    with pytest.raises(KeyError, match="asked for repeat 3, the saved run logged 2"):
        model.generate_until_multi_round([req])
    coco = _request("cooco_sample", 0, 2)
    assert model.generate_until([coco, coco]) == ["oven", "oven"] and model.single_logged == {"cooco_sample"}
    with pytest.raises(KeyError, match="no answer for task 'cooco_sample' doc 5"):
        model.generate_until([_request("cooco_sample", 5, 2)])


@pytest.fixture
def no_harness(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the harness ran although the rescore should have been refused")

    monkeypatch.setattr(evaluate, "run_harness", refuse)


def test_rescore_refuses_what_it_cannot_carry_over(tmp_path, no_harness):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"doc_id": 0, "filtered_resps": "oven"}]
    _samples(run / "20260101_120000_samples_cooco_sample.jsonl", lines)
    # no results JSON: the run's options are unknown
    with pytest.raises(FileNotFoundError, match="no 20260101_120000_results.json beside it"):
        evaluate.rescore(run, tmp_path / "out")
    _results(run / "20260101_120000_results.json", {"cooco_sample": 1, "cooco_noise_sample": 1})
    # the run evaluated a task whose samples file is missing: its group cannot be recomputed
    with pytest.raises(FileNotFoundError, match="wrote no samples file for it"):
        evaluate.rescore(run, tmp_path / "out")
    # options the run fixes cannot be given again
    for extra in (["--limit", "2"], ["--repeats=3"], ["--tasks", "cooco_sample"], ["--reasoning_tags", "none"]):
        with pytest.raises(ValueError, match="comes? from the run itself"):
            evaluate.rescore(run, tmp_path / "out", extra)
    # files of two runs with different limits
    other = tmp_path / "other"
    other.mkdir()
    _results(other / "20260102_120000_results.json", {"cooco_noise_sample": 1}, limit=9.0)
    _samples(other / "20260102_120000_samples_cooco_noise_sample.jsonl", lines)
    files = [
        run / "20260101_120000_samples_cooco_sample.jsonl",
        other / "20260102_120000_samples_cooco_noise_sample.jsonl",
    ]
    with pytest.raises(ValueError, match="different limit"):
        evaluate.rescore(files, tmp_path / "out")
    # the run's task folder is gone
    gone = tmp_path / "gone"
    _results(run / "20260101_120000_results.json", {"cooco_sample": 1}, include_path=str(gone))
    with pytest.raises(FileNotFoundError, match="--include_path .*gone no longer exists"):
        evaluate.rescore(run, tmp_path / "out")


def test_rescore_cli_names_the_refusal(tmp_path, capsys, no_harness):
    from lmms_scene.cli import main

    run = tmp_path / "run"
    run.mkdir()
    _samples(run / "20260101_120000_samples_cooco_sample.jsonl", [{"doc_id": 0, "filtered_resps": "oven"}])
    _results(run / "20260101_120000_results.json", {"cooco_sample": 1})
    assert main(["rescore", str(run), "--output_path", str(tmp_path / "o"), "--limit", "1"]) == 2
    assert "--limit comes from the run itself" in capsys.readouterr().err


# -- the journal ---------------------------------------------------------------------------------


class _Task:
    VERSION = 1

    def __init__(self, name, instances):
        self.instances = instances
        self.config = Namespace(repeats=instances[0].repeats, task=name)

    def dump_config(self):
        return {"repeats": self.config.repeats}


class _Model:
    batch_size = 1

    def __init__(self, stop_after=None):
        self.calls, self.stop_after = [], stop_after

    def generate_until(self, requests):
        self.calls.append(len(requests))
        if self.stop_after is not None and len(self.calls) > self.stop_after:
            raise J.Interrupted(signal.SIGTERM)
        return [f"{r.task_name}:{r.doc_id}:{len(self.calls)}" for r in requests]


def _fake_evaluate(lm, task_dict, cli_args=None, **_kwargs):
    # what lmms-eval does: every task's requests, each copied once per repeat, in one call
    cloned = [inst for task in task_dict.values() for inst in task.instances for _ in range(inst.repeats)]
    return lm.generate_until(cloned)


def _journal_lines(folder: Path) -> list[dict]:
    (path,) = sorted((folder / J.FOLDER).glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_journal_records_each_chunk_as_it_arrives_and_changes_no_answer(tmp_path, monkeypatch):
    import lmms_eval.evaluator as evaluator

    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    requests = [_request("t", d, 2) for d in range(3)]
    tasks = {"t": _Task("t", requests)}
    plain = _fake_evaluate(_Model(), tasks)
    assert J.install(tmp_path, 4)
    model = _Model()
    got = evaluator.evaluate(
        lm=model, task_dict=tasks, cli_args=Namespace(model="m", tasks="t", limit=None, output_path=str(tmp_path))
    )
    assert model.calls == [4, 2]  # 6 requests (3 docs x 2 repeats) in chunks of 4
    assert [g.rsplit(":", 1)[0] for g in got] == [p.rsplit(":", 1)[0] for p in plain]  # the same requests, in order
    assert "generate_until" not in model.__dict__  # the wrapper is gone after the run
    lines = _journal_lines(tmp_path)
    assert [x["kind"] for x in lines] == ["header", "plan"] + ["output"] * 6 + ["end"]
    assert lines[1]["tasks"]["t"] == {
        "request_types": ["generate_until"],
        "doc_ids": [0, 1, 2],
        "requests_per_doc": 1,
        "repeats": 2,
    }
    outputs = lines[2:8]
    assert [(x["doc_id"], x["copy"]) for x in outputs] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert [x["output"] for x in outputs] == got and outputs[0]["arguments"][:2] == ["prompt", {"max_new_tokens": 4}]
    assert lines[-1]["status"] == "finished" and lines[-1]["requests_done"] == lines[-1]["requests_total"] == 6


def test_an_interrupt_leaves_every_finished_chunk_on_disk(tmp_path, monkeypatch):
    import lmms_eval.evaluator as evaluator

    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    tasks = {"t": _Task("t", [_request("t", d, 1) for d in range(7)])}
    J.install(tmp_path, 3)
    with pytest.raises(J.Interrupted):
        evaluator.evaluate(lm=_Model(stop_after=2), task_dict=tasks, cli_args=Namespace(output_path=str(tmp_path)))
    lines = _journal_lines(tmp_path)
    assert [x["doc_id"] for x in lines if x["kind"] == "output"] == [0, 1, 2, 3, 4, 5]  # two chunks of 3
    end = lines[-1]
    assert end == {
        **end,
        "kind": "end",
        "status": "interrupted",
        "signal": "SIGTERM",
        "requests_done": 6,
        "requests_total": 7,
    }
    run = J.read(J.journal_files(tmp_path))
    assert run.status() == "interrupted" and J.replay_plan(run).partial == {"t": (6, 7, 0)}


def test_a_signal_just_after_a_chunk_is_written_still_counts_that_chunk(tmp_path):
    """A signal is raised between two bytecodes: here right after a chunk reached the file.
    The end record counts what the file holds (a counter raised after the write missed it)."""
    journal = J.Journal(tmp_path / "j.jsonl")
    journal.total = 3
    write = journal.write

    def write_then_signal(records):
        write(records)
        raise J.Interrupted(15)

    journal.write = write_then_signal
    with pytest.raises(J.Interrupted):
        journal.outputs(
            "generate_until", [_request("t", 0, 1), _request("t", 1, 1)], ["a", "b"], [0, 0], [["p", {}], ["p", {}]]
        )
    journal.write = write
    journal.end("interrupted", signal="SIGTERM")
    lines = [json.loads(x) for x in journal.path.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["output", "output", "end"]
    assert lines[-1]["requests_done"] == 2 == journal.done and lines[-1]["requests_total"] == 3


def _header(**fields) -> dict:
    return {
        "kind": "header",
        "journal_version": J.VERSION,
        "argv": ["x"],
        "tasks": "t",
        "limit": None,
        "offset": 0,
        "repeats": 1,
        "rank": 0,
        "world_size": 1,
        **fields,
    }


def _plan(docs, repeats: int = 1) -> dict:
    return {
        "kind": "plan",
        "tasks": {
            "t": {"request_types": ["generate_until"], "doc_ids": list(docs), "requests_per_doc": 1, "repeats": repeats}
        },
    }


def _output(doc: int, copy: int, text: str) -> dict:
    return {
        "kind": "output",
        "task": "t",
        "doc_id": doc,
        "idx": 0,
        "copy": copy,
        "request_type": "generate_until",
        "arguments": ["prompt", {"max_new_tokens": 4}],
        "output": text,
    }


def test_a_journal_cut_by_a_kill_reads_back_with_the_cut_reported(tmp_path):
    folder = tmp_path / J.FOLDER
    lines = [_header(repeats=2), _plan(range(5), repeats=2)]
    for doc, copies in ((0, 2), (1, 2), (2, 1), (3, 2)):  # doc 2 lost its second repeat
        lines += [_output(doc, c, f"{doc}/{c}") for c in range(copies)]
    J.Journal(folder / "20260101T000000_1_rank0.jsonl").write(lines)
    text = (folder / "20260101T000000_1_rank0.jsonl").read_text() + '{"kind": "output", "task": "t", "doc_'
    (folder / "20260101T000000_1_rank0.jsonl").write_text(text)
    run = J.read(J.journal_files(tmp_path))
    assert len(run.problems) == 1 and "cut off by the interruption" in run.problems[0]
    assert run.status() == "cut off" and run.complete_docs("t") == [0, 1, 3]
    plan = J.replay_plan(run)
    assert plan.partial == {"t": (2, 5, 1)} and not plan.complete and not plan.none
    # a multi-process run needs every rank's file
    (folder / "20260101T000000_1_rank0.jsonl").unlink()
    J.Journal(folder / "20260101T000000_1_rank0.jsonl").write([_header(repeats=2, world_size=2), *lines[1:]])
    with pytest.raises(ValueError, match="needs every rank's file; found ranks \\[0\\]"):
        J.read(J.journal_files(tmp_path))


def test_a_bad_chunk_setting_stops_eval_before_the_model_loads(monkeypatch, capsys):
    from lmms_scene.cli import main

    monkeypatch.setenv("LMMS_SCENE_JOURNAL_CHUNK", "0")
    assert main(["eval", "--model", "echo", "--tasks", "cooco_sample"]) == 2
    assert "LMMS_SCENE_JOURNAL_CHUNK: expected a positive integer, got '0'" in capsys.readouterr().err


def test_resume_serves_the_journaled_requests_and_asks_the_model_for_the_rest(tmp_path, monkeypatch):
    import lmms_eval.evaluator as evaluator

    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    tasks = {"t": _Task("t", [_request("t", d, 2) for d in range(4)])}
    cli = Namespace(model="m", tasks="t", limit=None, repeats=2, output_path=str(tmp_path / "first"))
    J.install(None, 3)
    with pytest.raises(J.Interrupted):
        evaluator.evaluate(lm=_Model(stop_after=1), task_dict=tasks, cli_args=cli)
    interrupted = J.read(J.journal_files(tmp_path / "first"))
    assert sum(len(v) for v in interrupted.outputs.values()) == 3  # doc 0 twice, doc 1 once
    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    J.install(None, 3, resume=interrupted)
    model = _Model()
    got = evaluator.evaluate(
        lm=model, task_dict=tasks, cli_args=Namespace(**{**vars(cli), "output_path": str(tmp_path / "second")})
    )
    assert sum(model.calls) == 5  # 8 requests, 3 served from the journal
    assert got[:3] == ["t:0:1", "t:0:1", "t:1:1"]  # the interrupted run's outputs, as it gave them
    lines = _journal_lines(tmp_path / "second")
    outputs = [x for x in lines if x["kind"] == "output"]
    assert len(outputs) == 8 and [x.get("resumed", False) for x in outputs] == [True] * 3 + [False] * 5
    # a resumed run must be the same run: other options, or other requests, are refused
    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    J.install(None, 3, resume=interrupted)
    with pytest.raises(ValueError, match="this run's limit 2 differs from the journal's None"):
        evaluator.evaluate(lm=_Model(), task_dict=tasks, cli_args=Namespace(**{**vars(cli), "limit": 2}))
    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    J.install(None, 3, resume=interrupted)
    other = {
        "t": _Task(
            "t",
            [
                Instance(
                    "generate_until",
                    ("another prompt", {}, None, d, "t", "test"),
                    0,
                    metadata={"task": "t", "doc_id": d, "repeats": 2},
                )
                for d in range(4)
            ],
        )
    }
    with pytest.raises(ValueError, match="is not this run's"):
        evaluator.evaluate(
            lm=_Model(), task_dict=other, cli_args=Namespace(**{**vars(cli), "output_path": str(tmp_path / "third")})
        )


def test_resume_needs_the_journal(monkeypatch, capsys):
    from lmms_scene.cli import main

    monkeypatch.setenv("LMMS_SCENE_JOURNAL", "off")
    assert main(["eval", "--model", "echo", "--tasks", "cooco_sample", "--resume", "somewhere"]) == 2
    assert "needs the journal on" in capsys.readouterr().err


def test_a_model_that_fails_mid_run_leaves_its_earlier_chunks_and_says_so(tmp_path, monkeypatch):
    import lmms_eval.evaluator as evaluator

    class Failing(_Model):
        def generate_until(self, requests):
            if self.calls:
                raise RuntimeError("CUDA out of memory")
            return super().generate_until(requests)

    monkeypatch.setattr(evaluator, "evaluate", _fake_evaluate)
    J.install(tmp_path, 2)
    with pytest.raises(RuntimeError, match="out of memory"):
        evaluator.evaluate(
            lm=Failing(),
            task_dict={"t": _Task("t", [_request("t", d, 1) for d in range(5)])},
            cli_args=Namespace(output_path=str(tmp_path)),
        )
    lines = _journal_lines(tmp_path)
    assert [x["doc_id"] for x in lines if x["kind"] == "output"] == [0, 1]
    assert lines[-1]["status"] == "failed" and lines[-1]["error"] == "RuntimeError: CUDA out of memory"
