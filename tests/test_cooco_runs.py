"""Whole COOCO runs through the harness: a missing checkpoint stops before generating, an
unscoreable row is recorded while the run is written, a saved run rescores to the same
numbers, and a dataset built locally is one printed command away from its results."""

from __future__ import annotations

import sys

import build_kit
import pytest
from conftest import REPO, find_results, find_samples, harness_env, run_python

from lmms_scene.data import cooco

pytestmark = pytest.mark.e2e

SAMPLE = REPO / "tasks" / "cooco" / cooco.SAMPLE_FILE


def numbers(results: dict) -> dict:
    """Every numeric metric of a results JSON, by task."""
    return {
        task: {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for task, metrics in results["results"].items()
    }


def test_missing_clip_stops_the_run_before_anything_is_generated(run_lmms_eval, tmp_path):
    record = tmp_path / "echo.jsonl"
    code, _results, out, log = run_lmms_eval(
        ["--model", "echo", "--model_args", f"record={record}", "--tasks", "cooco_sample"],
        env={"LMMS_SCENE_CLIP_MODEL": str(tmp_path / "no-such-clip")},
    )
    assert code != 0
    assert "Could not load the CLIP checkpoint" in log and "hf download" in log
    assert not record.exists(), "the model answered although the metrics could not be computed"
    assert "Postprocessing" not in log


def test_an_unscoreable_row_is_recorded_and_the_run_still_written(run_lmms_eval, tmp_path, tiny_clip):
    import datasets

    data = datasets.load_dataset("parquet", data_files={"test": str(SAMPLE)})["test"]
    bad_id = data[0]["image_id"]
    broken = data.map(lambda row: {"width": row["width"] + 5} if row["image_id"] == bad_id else {})
    written = cooco.write_local(broken, tmp_path / "broken", "card", name="broken")
    # the simple blind class never decodes an image, so the broken row reaches scoring
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--force_simple", "--tasks", "cooco_broken"],
        env={"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)},
        include=written["include_path"],
    )
    assert code == 0, log[-3000:]
    report = results["results"]["cooco_broken"]["cooco_breakdown,none"]
    stats = report["output_statistics"]
    assert stats["n"] == 29 and stats["n_unscored"] == 1
    # caught when the task loads the rows (data/recheck.py), named by row, field and value
    reason = stats["unscored"][0]["reason"]
    assert (
        stats["unscored"][0]["image_id"] == bad_id
        and "fields 'width', 'height'" in reason
        and "but its image is 96x72" in reason
    )
    rows = [s["cooco_breakdown"] for s in find_samples(out, "cooco_broken")]
    assert len(rows) == 29 and sum(not r["scored"] for r in rows) == 1
    # the headline means are over the 28 scored rows: the broken one is not a zero
    scored = [r["accuracy"] for r in rows if r["scored"]]
    assert results["results"]["cooco_broken"]["accuracy,none"] == pytest.approx(sum(scored) / 28)


@pytest.mark.xdist_group("cooco_blind")
def test_a_saved_run_rescores_to_the_same_numbers(cooco_blind_run, tmp_path, tiny_clip):
    env = {"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)}
    code, first, out, log = cooco_blind_run  # scene_blind on cooco_sample,cooco_noise_sample (conftest.py)
    assert code == 0, log[-3000:]
    again = tmp_path / "rescored"
    proc = run_python(
        [
            sys.executable,
            "-m",
            "lmms_scene.cli",
            "rescore",
            str(out),
            "--output_path",
            str(again),
            "--verbosity",
            "DEBUG",
        ],
        capture_output=True,
        text=True,
        env=harness_env(env),
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    second = find_results(again)
    assert second["config"]["model"] == "scene_from_samples"
    for task, metrics in numbers(first).items():
        assert metrics.keys() == numbers(second)[task].keys()
        for key, value in metrics.items():
            assert numbers(second)[task][key] == pytest.approx(value, abs=1e-9), (task, key)
    assert (
        first["results"]["cooco_sample"]["cooco_breakdown,none"]["by_condition_noise"]
        == (second["results"]["cooco_sample"]["cooco_breakdown,none"]["by_condition_noise"])
    )


def test_local_build_round_trip(tmp_path, tiny_clip):
    from test_cooco_data import make_folder

    env = harness_env({"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)})
    folder = make_folder(tmp_path)
    built = tmp_path / "built"
    proc = run_python(
        [
            sys.executable,
            "-m",
            "lmms_scene.cli",
            "build",
            "cooco",
            "--from-folder",
            str(folder),
            "--out",
            str(built),
            "--name",
            "my_cooco",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the printed blind-baseline command, run exactly as printed (plus a results folder)
    argv, run, results_dir = build_kit.run_printed_baseline(proc.stdout, tmp_path, env)
    assert argv[:2] == ["lmms-scene", "eval"] and "--tasks" in argv and "cooco_my_cooco" in argv
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    results = find_results(results_dir)
    task = results["results"]["cooco_my_cooco"]
    assert task["cooco_breakdown,none"]["n_rows"] == 3  # clean is not a naming item
    assert results["configs"]["cooco_my_cooco"]["metadata"]["benchmark"] == "cooco"
    # show recognises it as COOCO by what it declares
    show = build_kit.show(results_dir, tmp_path, env)
    assert show.returncode == 0, show.stderr[-2000:]
    assert show.stdout.startswith("# COOCO") and "| original |" in show.stdout and "(n=1)" in show.stdout
    assert "scene_blind" in show.stdout and "not lmms-scene tasks" not in show.stdout
