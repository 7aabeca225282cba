"""Running the harness on lmms-scene's tasks: ``lmms-scene eval`` and ``lmms-scene demo``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lmms_scene.registration import install_task_path_hook, tasks_path

#: the benchmarks lmms-scene defines, with the issue that brings each one
BENCHMARKS = {"cooco": "COOCO", "snus": "SNUS", "layered_vqa": "Layered-VQA"}


def sample_tasks() -> dict[str, str | None]:
    """Each benchmark's sample task name, or None where the benchmark is not built yet."""
    root = tasks_path()
    return {b: (f"{b}_sample" if (root / b / f"{b}_sample.yaml").is_file() else None) for b in BENCHMARKS}


def run_harness(argv: list[str]) -> int:
    """Run ``lmms_eval`` in this process with our tasks registered.

    lmms-eval 0.7.3 logs a failed evaluation and exits 0; this returns 1 instead, so
    scripts and CI notice. ``--help`` and ``--tasks list`` behave as in the harness.
    """
    if not install_task_path_hook():
        argv = [*argv, "--include_path", str(tasks_path())]
    import lmms_eval.__main__ as harness

    failures: list[BaseException] = []
    original = harness.cli_evaluate_single

    def evaluate_single(args):
        try:
            return original(args)
        except SystemExit:
            raise
        except BaseException as err:
            failures.append(err)
            raise

    saved_argv = sys.argv
    harness.cli_evaluate_single = evaluate_single
    sys.argv = ["lmms_eval", *argv]
    try:
        harness.cli_evaluate()
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception as err:  # re-raised by the harness under --verbosity DEBUG
        if err not in failures:
            failures.append(err)
    finally:
        harness.cli_evaluate_single = original
        sys.argv = saved_argv
    if failures:
        print(f"lmms-scene eval: the evaluation failed: {failures[-1]!r}", file=sys.stderr)
        return 1
    return 0


def _clip_for_demo() -> None:
    """The demo runs offline: with no CLIP checkpoint at hand it switches the CLIP
    metrics off (recorded as not computed in the results) and says so, instead of failing."""
    import os

    from lmms_scene.metrics import clip

    if os.environ.get(clip.CLIP_MODEL_ENV) or clip.default_model_cached():
        return
    os.environ[clip.CLIP_MODEL_ENV] = clip.CLIP_DISABLED
    print(
        f"lmms-scene demo: {clip.DEFAULT_CLIP_MODEL} is not in the local Hugging Face cache, so COOCO's "
        "CLIP metrics (RefCLIPScore, accuracy, output-scene similarity, context capture) are recorded as "
        "not computed. Download it once (`huggingface-cli download "
        f"{clip.DEFAULT_CLIP_MODEL}`) or set {clip.CLIP_MODEL_ENV}=<local CLIP folder> to compute them."
    )


def demo(output_path: str | Path = "results", extra: list[str] | None = None) -> int:
    """Every built benchmark's sample split with the ``scene_blind`` baseline."""
    available = sample_tasks()
    missing = [BENCHMARKS[b] for b, t in available.items() if t is None]
    tasks = [t for t in available.values() if t]
    for name in missing:
        print(f"lmms-scene demo: {name} is not built yet in this version; skipping it.")
    if not tasks:
        print("lmms-scene demo: no benchmark is built yet; nothing to run.", file=sys.stderr)
        return 1
    _clip_for_demo()
    out = Path(output_path).resolve()
    started = time.time()
    code = run_harness(
        ["--model", "scene_blind", "--tasks", ",".join(tasks), "--output_path", str(out), "--log_samples", *(extra or [])]
    )
    if code != 0:
        return code
    written = sorted(p for p in out.rglob("*_results.json") if p.stat().st_mtime >= started - 1)
    if not written:
        print(f"lmms-scene demo: the harness wrote no results under {out}", file=sys.stderr)
        return 1
    print(f"lmms-scene demo: ran {', '.join(tasks)} with scene_blind; results: {written[-1]}")
    return 0
