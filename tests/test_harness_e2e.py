"""Real lmms_eval runs: our models, a real harness model class on a tiny random
Qwen2.5-VL (single- and multi-round), and several processes under accelerate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import SELFTEST_TASKS, find_results, find_samples, harness_env, launch_ranks

from lmms_scene import benchmarks

pytestmark = pytest.mark.e2e


def _metric(results: dict, task: str, metric: str):
    return results["results"][task][f"{metric},none"]


@pytest.mark.parametrize("force_simple", [True, False], ids=["simple", "chat"])
def test_echo_single_and_multi_round(run_lmms_eval, tmp_path, force_simple):
    record = tmp_path / "echo.jsonl"
    args = ["--model", "echo", "--model_args", f"record={record}", "--tasks", "scene_selftest,scene_selftest_rounds"]
    rc, results, _out, log = run_lmms_eval(args + (["--force_simple"] if force_simple else []), include=SELFTEST_TASKS)
    assert rc == 0, log[-3000:]
    assert _metric(results, "scene_selftest_rounds", "selftest_rounds_ok") == 1.0
    assert _metric(results, "scene_selftest_rounds", "selftest_by_item") == {
        "s0": 3,
        "s1": 2,
        "s2": 3,
        "s3": 1,
        "s4": 2,
    }
    lines = [json.loads(l) for l in record.read_text().splitlines()]
    assert {l["variant"] for l in lines} == {"simple" if force_simple else "chat"}
    multi = {l["doc_id"]: l for l in lines if l["task"] == "scene_selftest_rounds"}
    # round 2 of item s0 sends one half-size image, round 1 none
    assert [t["image_sizes"] for t in multi[0]["turns"]] == [[[64, 48]], [], [[32, 24]]]
    assert multi[0]["turns"][2]["text"].startswith("[s0] round 2 after: ")
    # the results record the harness's own release, not the commit of the repository that
    # happens to hold the virtualenv (lmms-eval 0.7.3 asks git from its site-packages)
    from importlib import metadata

    assert results["lmms_eval_version"] == metadata.version("lmms-eval")
    assert results["git_hash"] is None and results["git_branch"] is None


@pytest.mark.xdist_group("qwen")
def test_real_qwen2_5_vl_class_on_tiny_checkpoint(qwen_run):
    # the self-test tasks through qwen2_5_vl --force_simple, 8 new tokens (conftest.py)
    rc, results, out, log = qwen_run
    assert rc == 0, log[-3000:]
    # Multi-round through the harness's own model class: every round was generated.
    assert _metric(results, "scene_selftest_rounds", "selftest_rounds_ok") == 1.0
    samples = find_samples(out, "scene_selftest")
    assert len(samples) == 5 and all(isinstance(s["filtered_resps"], (str, list)) for s in samples)


def _task_results(results: dict) -> dict:
    return {task: {k: v for k, v in metrics.items() if k != "alias"} for task, metrics in results["results"].items()}


@pytest.mark.multiprocess
def test_two_cpu_processes_give_the_single_process_results(run_lmms_eval, tmp_path, tiny_clip):
    """Docs are sharded round-robin and gathered rank by rank; aggregations keyed by
    position would differ here. The two ranks are forks of the tests' pre-imported
    interpreter, each with the environment ``accelerate launch --multi_gpu
    --num_processes 2`` gives its processes (:func:`conftest.launch_env`), joined in a gloo
    group on the CPU as under accelerate; with ``LMMS_SCENE_TEST_FORK=0`` the run is a
    real ``accelerate launch``."""
    # echo answers every task, so one run covers the multi-round self-test and every
    # built benchmark's sample aggregations together
    samples = [t for bench in benchmarks.built() for t in bench.sample_tasks]
    assert samples, "no benchmark is built"
    tasks = ["scene_selftest", "scene_selftest_rounds", *samples]
    common = ["--model", "echo", "--tasks", ",".join(tasks)]
    env = {"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)}  # COOCO's CLIP metrics, offline
    rc, single, _out, log = run_lmms_eval(common, include=SELFTEST_TASKS, env=env)
    assert rc == 0, log[-3000:]

    out = tmp_path / "multi"
    harness = [
        "-m",
        "lmms_eval",
        "--include_path",
        str(SELFTEST_TASKS),
        "--output_path",
        str(out),
        "--verbosity",
        "DEBUG",
        *common,
    ]
    ranks = launch_ranks([sys.executable, *harness], 2, env=harness_env(env), cwd=tmp_path, timeout=900)
    if ranks is None:  # no fork: the real launcher
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            # --multi_gpu picks torchrun; with no GPU the processes join a gloo group on the CPU.
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            *harness,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=harness_env(env), timeout=900, cwd=tmp_path)
        codes, log = [proc.returncode], proc.stdout + proc.stderr
    else:
        logs = [rank.communicate(timeout=900)[0] for rank in ranks]
        codes, log = [rank.returncode for rank in ranks], "\n".join(logs)
    assert codes == [0] * len(codes), log[-3000:]
    assert "Running on rank 1" in log, "the second process never ran"
    multi = find_results(out)
    assert set(multi["results"]) >= set(tasks)
    assert multi["results"]["scene_selftest_rounds"]["selftest_rounds_ok,none"] == 1.0
    # Equal up to float rounding: CLIP embeddings are batched differently per rank and
    # sums run in another order; ids, counts and structure must match exactly.
    assert _task_results(multi) == _approx(_task_results(single))


def _approx(value):
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-6, abs=1e-9)
    return value
