"""Faults and replays end to end, in real ``lmms-scene eval`` / ``rescore`` subprocesses
(issue 16, items 5 and 6).

* A real SIGTERM (and SIGINT) sent to ``lmms-scene eval`` on the tiny Qwen2.5-VL: the
  outputs generated so far and their requests are on disk (the journal), the exit code
  says which signal, and ``lmms-scene rescore`` scores exactly those outputs.
* The journal changes no number of a run that is not interrupted: the same run with the
  journal on (small chunks) and off gives the same samples and results.
* ``rescore`` of a ``--repeats`` run replays every repeat as logged and carries the run's
  options over: the rescore of a rescore reproduces it.
"""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import find_results, find_samples, harness_env, popen_python, run_python

from lmms_scene import journal as J
from lmms_scene.harness import round_outputs
from lmms_scene.metrics.outputs import clean_response

pytestmark = pytest.mark.e2e

QWEN = "pretrained={},device=cpu,device_map=cpu,min_pixels=3136,max_pixels=50176"
ENV = {"LMMS_SCENE_CLIP_MODEL": "none"}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "lmms_scene.cli", *args]


def _run(args: list[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return run_python(
        _cli(*args), capture_output=True, text=True, env=harness_env({**ENV, **(env or {})}), timeout=timeout, cwd=cwd
    )


def _numbers(results: dict) -> dict:
    return {t: {k: v for k, v in m.items() if k != "alias"} for t, m in results["results"].items()}


def _outputs(journal_file: Path) -> dict[tuple[str, int, int], object]:
    lines = [json.loads(x) for x in journal_file.read_text().splitlines() if x.strip()]
    return {(x["task"], x["doc_id"], x["copy"]): x["output"] for x in lines if x["kind"] == "output"}


def _qwen_eval(model_dir: Path, out: Path, limit: int, tokens: int, tasks: str = "layered_vqa_sample") -> list[str]:
    return [
        "eval",
        "--model",
        "qwen2_5_vl",
        "--force_simple",
        "--model_args",
        QWEN.format(model_dir),
        "--gen_kwargs",
        f"max_new_tokens={tokens}",
        "--batch_size",
        "1",
        "--limit",
        str(limit),
        "--tasks",
        tasks,
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "DEBUG",
    ]


def _interrupt(cmd: list[str], out: Path, cwd: Path, signum: int, min_outputs: int = 2) -> tuple:
    """Start ``lmms-scene eval``, send ``signum`` once ``min_outputs`` outputs are journaled."""
    # a fork of the pre-imported interpreter, signalled as a Popen is (a fresh process when
    # LMMS_SCENE_TEST_FORK=0)
    proc = popen_python(_cli(*cmd), env=harness_env({**ENV, "LMMS_SCENE_JOURNAL_CHUNK": "1"}), cwd=cwd)
    deadline = time.monotonic() + 400
    journal_file = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = sorted((out / J.FOLDER).glob("*.jsonl")) if (out / J.FOLDER).is_dir() else []
        if found and len(_outputs(found[0])) >= min_outputs:
            journal_file = found[0]
            break
        time.sleep(0.2)
    if journal_file is None:
        proc.kill()
        pytest.fail("the run ended or hung before the outputs were journaled:\n" + proc.communicate()[0][-3000:])
    proc.send_signal(signum)
    log, _ = proc.communicate(timeout=300)
    return proc, log, journal_file


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_eval_keeps_what_was_generated_and_rescore_scores_it(tmp_path, tiny_qwen_vl, signum):
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    out = tmp_path / "run"
    proc, log, journal_file = _interrupt(_qwen_eval(tiny_qwen_vl, out, limit=16, tokens=48), out, tmp_path, signum)
    assert proc.returncode == 128 + signum, log[-3000:]
    name = signal.Signals(signum).name
    assert f"stopped by {name}" in log and f"lmms-scene rescore {journal_file}" in log
    assert not list(out.rglob("*_results.json"))  # the harness itself wrote nothing
    lines = [json.loads(x) for x in journal_file.read_text().splitlines() if x.strip()]
    end = lines[-1]
    assert end["kind"] == "end" and end["status"] == "interrupted" and end["signal"] == name
    outputs = _outputs(journal_file)
    assert end["requests_done"] == len(outputs) >= 2 and end["requests_total"] == 16
    for line in lines:
        if line["kind"] == "output":  # each output with the request that produced it
            assert (
                line["task"] == "layered_vqa_sample"
                and line["arguments"][0]
                and line["arguments"][1]["max_new_tokens"] == 48
            )
    # rescore scores exactly what was generated: the first N documents
    again = tmp_path / "rescored"
    done = _run(["rescore", str(out), "--output_path", str(again), "--verbosity", "DEBUG"], tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    n = len(outputs)
    assert f"the first {n} of 16 documents generated" in done.stdout
    part = again / "partial_layered_vqa_sample"
    results = find_results(part)
    assert results["config"]["limit"] == n and results["config"]["model"] == "scene_from_samples"
    assert results["results"]["layered_vqa_sample"]["layered_vqa_report,none"]["n_rows"] == n
    rows = find_samples(part, "layered_vqa_sample")
    assert sorted(s["doc_id"] for s in rows) == list(range(n))
    for sample in rows:
        # the journal keeps the model's raw text; the rows hold it sanitised (metrics/outputs.py)
        assert sample["layered_vqa_report"]["outputs"] == clean_response(
            round_outputs([outputs[("layered_vqa_sample", sample["doc_id"], 0)]])
        )


def test_the_journal_changes_no_number_of_an_uninterrupted_run(tmp_path, tiny_qwen_vl):
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    tasks = "layered_vqa_sample,cooco_sample"
    off = _run(
        _qwen_eval(tiny_qwen_vl, tmp_path / "off", limit=3, tokens=6, tasks=tasks),
        tmp_path,
        {"LMMS_SCENE_JOURNAL": "off"},
    )
    assert off.returncode == 0, (off.stdout + off.stderr)[-3000:]
    on = _run(
        _qwen_eval(tiny_qwen_vl, tmp_path / "on", limit=3, tokens=6, tasks=tasks),
        tmp_path,
        {"LMMS_SCENE_JOURNAL_CHUNK": "2"},
    )
    assert on.returncode == 0, (on.stdout + on.stderr)[-3000:]
    assert not (tmp_path / "off" / J.FOLDER).exists()
    (journal_file,) = (tmp_path / "on" / J.FOLDER).glob("*.jsonl")
    assert len(_outputs(journal_file)) == 6  # 3 documents of each task, in chunks of 2
    assert _numbers(find_results(tmp_path / "on")) == _numbers(find_results(tmp_path / "off"))
    for task in tasks.split(","):
        a, b = find_samples(tmp_path / "on", task), find_samples(tmp_path / "off", task)
        strip = lambda s: {k: v for k, v in s.items() if k not in ("token_counts",)}  # noqa: E731
        assert [strip(x) for x in a] == [strip(x) for x in b]
    # and the journal of a finished run rescores to the same numbers
    again = _run(["rescore", str(journal_file), "--output_path", str(tmp_path / "re")], tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert _numbers(find_results(tmp_path / "re")) == _numbers(find_results(tmp_path / "on"))


def test_rescore_replays_every_repeat_as_logged(tmp_path):
    """A --repeats 2 run whose repeats differ (its second repeat answers some questions
    right where the first is wrong): the rescore replays both, so unreliability is what
    the logged answers give, not 0; the rescore of the rescore reproduces it."""
    from lmms_scene.metrics.layered_vqa import aggregation

    run = tmp_path / "run"
    first = _run(
        [
            "eval",
            "--model",
            "scene_blind",
            "--tasks",
            "layered_vqa_sample,cooco_sample",
            "--limit",
            "16",
            "--repeats",
            "2",
            "--output_path",
            str(run),
            "--log_samples",
            "--verbosity",
            "DEBUG",
        ],
        tmp_path,
    )
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    # a model that varies between samples: on every other document, the second repeat
    # gives the gold answer where the first was wrong
    (samples_file,) = run.rglob("*_samples_layered_vqa_sample.jsonl")
    lines = [json.loads(x) for x in samples_file.read_text().splitlines()]
    changed = 0
    for line in lines:
        repeats = ast.literal_eval(line["filtered_resps"])["lmms_scene_repeats"]
        if not line["layered_vqa_report"]["correct"] and line["doc_id"] % 2 == 0:
            repeats[1] = [*repeats[1][:-1], line["target"]]
            changed += 1
        line["filtered_resps"] = str({"lmms_scene_repeats": repeats})
    assert 0 < changed < len(lines)
    samples_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    once = tmp_path / "once"
    done = _run(["rescore", str(run), "--output_path", str(once), "--verbosity", "DEBUG"], tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "--repeats 2" in done.stdout and "cooco_sample: the samples hold the first of 2 answers" in done.stdout
    res = find_results(once)
    assert res["configs"]["layered_vqa_sample"]["repeats"] == 2 and res["config"]["limit"] == 16
    rows = aggregation.expand_repeats(s["layered_vqa_report"] for s in find_samples(once, "layered_vqa_sample"))
    assert len(rows) == 32
    # every repeat replayed as logged: the second repeat's final answers are the edited ones
    by_key = {(r["question_id"], r["schedule"], r["repeat"]): r for r in rows}
    for line in lines:
        repeats = ast.literal_eval(line["filtered_resps"])["lmms_scene_repeats"]
        key = (line["layered_vqa_report"]["question_id"], line["layered_vqa_report"]["schedule"])
        assert by_key[(*key, 0)]["outputs"] == repeats[0] and by_key[(*key, 1)]["outputs"] == repeats[1]
    # unreliability from the logged answers (numpy's linear P90 - P10 of each question's
    # scores, averaged per schedule), independently of the report
    expected: dict[str, list[float]] = {}
    for line in lines:
        key = (line["layered_vqa_report"]["question_id"], line["layered_vqa_report"]["schedule"])
        scores = np.array([float(by_key[(*key, k)]["correct"]) for k in (0, 1)])
        expected.setdefault(key[1], []).append(float(np.percentile(scores, 90) - np.percentile(scores, 10)))
    reliability = res["results"]["layered_vqa_sample"]["layered_vqa_report,none"]["reliability"]
    assert any(v > 0 for vs in expected.values() for v in vs)
    for schedule, values in expected.items():
        assert reliability[schedule]["unreliability"] == pytest.approx(sum(values) / len(values))
    # the rescore of the rescore: the same numbers
    twice = tmp_path / "twice"
    again = _run(["rescore", str(once), "--output_path", str(twice)], tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert _numbers(find_results(twice)) == _numbers(res)


def test_an_interrupted_run_resumes_to_the_numbers_of_an_uninterrupted_one(tmp_path, tiny_qwen_vl):
    """``lmms-scene eval --resume JOURNAL`` with the interrupted run's arguments: the
    journaled outputs are served, only the rest is generated, and the run's numbers and
    samples equal those of the same run never interrupted."""
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    first = tmp_path / "first"
    proc, log, journal_file = _interrupt(
        _qwen_eval(tiny_qwen_vl, first, limit=8, tokens=16), first, tmp_path, signal.SIGTERM
    )
    assert proc.returncode == 128 + signal.SIGTERM, log[-3000:]
    served = len(_outputs(journal_file))
    assert 2 <= served < 8
    resumed = tmp_path / "resumed"
    done = _run(
        ["eval", "--resume", str(journal_file), *_qwen_eval(tiny_qwen_vl, resumed, limit=8, tokens=16)[1:]], tmp_path
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert f"{served} outputs served from it" in done.stderr
    (new_journal,) = (resumed / J.FOLDER).glob("*.jsonl")
    lines = [json.loads(x) for x in new_journal.read_text().splitlines()]
    assert sum(1 for x in lines if x.get("resumed")) == served and lines[-1]["status"] == "finished"
    whole = tmp_path / "whole"
    never = _run(_qwen_eval(tiny_qwen_vl, whole, limit=8, tokens=16), tmp_path, {"LMMS_SCENE_JOURNAL": "off"})
    assert never.returncode == 0, (never.stdout + never.stderr)[-3000:]
    assert _numbers(find_results(resumed)) == _numbers(find_results(whole))
    strip = lambda s: {k: v for k, v in s.items() if k != "token_counts"}  # noqa: E731
    assert [strip(x) for x in find_samples(resumed, "layered_vqa_sample")] == [
        strip(x) for x in find_samples(whole, "layered_vqa_sample")
    ]
    # a resume with other arguments is refused before anything is generated
    other = _run(
        ["eval", "--resume", str(journal_file), *_qwen_eval(tiny_qwen_vl, tmp_path / "other", limit=4, tokens=16)[1:]],
        tmp_path,
    )
    assert (
        other.returncode != 0 and "this run's limit 4.0 differs from the journal's 8.0" in other.stdout + other.stderr
    )
