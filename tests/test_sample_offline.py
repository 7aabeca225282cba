"""The embedded sample tasks run anywhere (issue 18): offline, with no setting and no CLIP
checkpoint at hand, the CLIP metrics are recorded as not computed with the reason and the
command that fetches the checkpoint; a chosen checkpoint that cannot be loaded, and the full
benchmarks, still stop before the model runs with our message last."""

from __future__ import annotations

import importlib
import sys

import datasets
import pytest
from conftest import README_COMMAND, REPO, clear_cache_keeping_models, find_samples, harness_env, run_python

from lmms_scene import settings
from lmms_scene.metrics import clip

FETCH = "hf download openai/clip-vit-base-patch32"


@pytest.fixture
def no_clip_at_hand(monkeypatch):
    """No checkpoint chosen, the default one not in the cache; the process state restored after."""
    monkeypatch.setattr(clip, "default_model_cached", lambda: False)
    monkeypatch.setattr(clip, "_NOT_AT_HAND", None)
    with settings.override(clip_model=clip.DEFAULT_CLIP_MODEL, clip_model_explicit=False):
        yield


def test_a_sample_task_records_why_clip_is_not_computed(no_clip_at_hand, monkeypatch):
    loads = []
    monkeypatch.setattr(clip, "_load", lambda name, device: loads.append(name))
    utils = importlib.import_module("lmms_scene.tasks.cooco.utils")
    raw = datasets.load_dataset("parquet", data_files={"test": str(REPO / "tasks/cooco/sample/cooco_sample.parquet")})[
        "test"
    ]
    docs = utils.process_docs_sample(raw)
    assert len(docs) > 0 and loads == []  # nothing loaded, nothing downloaded
    reason = clip.not_computed_reason()
    assert reason and FETCH in reason and clip.CLIP_MODEL_ENV in reason and not clip.clip_enabled()
    from lmms_scene.metrics.cooco import scoring

    prov = scoring.provenance()
    assert (
        prov["clip_model"] is None
        and prov["clip_metrics"].startswith("not computed: ")
        and FETCH in prov["clip_metrics"]
    )


@pytest.mark.slow
def test_a_chosen_checkpoint_that_cannot_load_still_stops_a_sample_task(tmp_path, monkeypatch):
    monkeypatch.setattr(clip, "_NOT_AT_HAND", None)
    utils = importlib.import_module("lmms_scene.tasks.snus.utils")

    clear_cache_keeping_models()
    with settings.override(clip_model=str(tmp_path / "no-such-clip"), clip_model_explicit=True):
        assert clip.for_sample_run() is None
        with pytest.raises(clip.ClipModelUnavailable, match="no-such-clip.*hf download"):
            utils.process_docs_sample(None)


def test_the_full_benchmark_still_needs_its_checkpoint(no_clip_at_hand, monkeypatch):
    """Even after a sample task recorded CLIP as not at hand, a full task in the same run
    tries to load it and stops, saying how to get it."""
    from lmms_scene.metrics.cooco import scoring

    clear_cache_keeping_models()
    clip.for_sample_run()

    def missing(name, device):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.setattr(clip, "load_pretrained", lambda *a, **k: missing(*a[:2]))
    with pytest.raises(clip.ClipModelUnavailable) as err:
        scoring.require_metrics()
    message = str(err.value)
    assert (
        message.endswith("saved with save_pretrained).")
        and FETCH in message
        and "LMMS_SCENE_CLIP_MODEL=/path/to/clip" in message
    )


def test_our_message_is_the_last_line_not_the_hubs():
    from lmms_scene.evaluate import root_cause

    try:
        try:
            raise OSError("LocalEntryNotFoundError: cannot find the requested files in the local cache")
        except OSError as hub:
            raise clip.ClipModelUnavailable(f"Could not load ... `{FETCH}`") from hub
    except clip.ClipModelUnavailable as ours:
        wrapped = RuntimeError("task build failed")
        wrapped.__cause__ = ours
        assert root_cause(wrapped) is ours


@pytest.mark.e2e
@pytest.mark.xdist_group("readme")
def test_the_readmes_offline_command_runs_with_no_setting(readme_run):
    """README: ``python -m lmms_eval --tasks cooco_sample,snus_sample,layered_vqa_sample
    --model scene_blind --output_path out --log_samples`` (conftest.README_COMMAND), with no
    CLIP checkpoint in the hub cache and no LMMS_SCENE_CLIP_MODEL; then ``lmms-scene show
    out`` prints every benchmark. It runs in the pytest run's HF_HOME, which holds no CLIP
    checkpoint (checked first), so the fork server runs it; tests/test_demo.py runs the
    demo with an empty HF_HOME, as on a fresh machine."""
    code, results, out, log = readme_run
    assert code == 0, log[-3000:]
    assert README_COMMAND[:2] == ["-m", "lmms_eval"] and "--include_path" not in README_COMMAND  # the hook's route
    env = harness_env()
    env.pop(settings.CLIP_MODEL_ENV, None)
    cooco = results["results"]["cooco_sample"]["cooco_breakdown,none"]
    assert cooco["scorer"]["clip_model"] is None and FETCH in cooco["scorer"]["clip_metrics"]
    snus = results["results"]["snus_sample"]["snus_report,none"]
    assert FETCH in snus["model"]["provenance"]["clipscore"]
    assert all(r["cooco_breakdown"]["refclipscore"] is None for r in find_samples(out, "cooco_sample"))
    # the harness's own printed table says why a headline reads N/A (the line under the table)
    na = [line for line in log.splitlines() if line.startswith("N/A cooco_sample: ")]
    assert na and "refclipscore" in na[0] and FETCH in na[0], log[-3000:]
    show = run_python(
        [sys.executable, "-m", "lmms_scene.cli", "show", "out"],
        env={**env, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out.parent,
    )
    assert show.returncode == 0, show.stderr[-2000:]
    text = " ".join(show.stdout.split())
    assert all(f"# {title}" in show.stdout for title in ("COOCO", "SNUS", "Layered-VQA"))
    assert "not computed" in text and FETCH in text
