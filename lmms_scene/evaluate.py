"""Running the harness on lmms-scene's tasks: ``lmms-scene eval`` and ``lmms-scene demo``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lmms_scene.registration import install_task_path_hook, tasks_path


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
        cause = root_cause(failures[-1])
        print(f"lmms-scene eval: the evaluation failed: {type(cause).__name__}: {cause}", file=sys.stderr)
        hint = data_hint(_tasks_of(argv), cause)
        if hint:
            print(f"lmms-scene eval: {hint}", file=sys.stderr)
        return 1
    return 0


def root_cause(err: BaseException) -> BaseException:
    """The error behind the harness's wrappers (tenacity's ``RetryError`` after its 5
    attempts at ``process_results``, chained exceptions)."""
    seen = set()
    while id(err) not in seen:
        seen.add(id(err))
        last = getattr(err, "last_attempt", None)
        if last is not None and hasattr(last, "exception") and last.exception() is not None:
            err = last.exception()
            continue
        if err.__cause__ is not None:
            err = err.__cause__
            continue
        break
    return err


def _tasks_of(argv: list[str]) -> list[str]:
    for i, arg in enumerate(argv):
        if arg == "--tasks" and i + 1 < len(argv):
            return [t for t in argv[i + 1].split(",") if t]
        if arg.startswith("--tasks="):
            return [t for t in arg.split("=", 1)[1].split(",") if t]
    return []


#: error names that mean a dataset could not be fetched from the hub
_OFFLINE_ERRORS = ("ConnectionError", "OfflineModeIsEnabled", "LocalEntryNotFoundError", "DatasetNotFoundError",
                   "HfHubHTTPError", "MaxRetryError", "NameResolutionError")  # fmt: skip


def data_hint(tasks: list[str], err: BaseException) -> str | None:
    """What to do when one of our hub-backed tasks could not load its data: build it
    locally (the registry's ``build_hint``)."""
    from lmms_scene import benchmarks

    text = f"{type(err).__name__}: {err}"
    if not any(name in text for name in _OFFLINE_ERRORS):
        return None
    hints = []
    for task in tasks:
        try:
            bench = benchmarks.benchmark_of_task(task)
        except ValueError:
            continue
        if bench.build_hint and task not in bench.sample_tasks and bench.build_hint not in hints:
            hints.append(bench.build_hint)
    if not hints:
        return None
    return "the data could not be loaded from the Hugging Face hub (offline?). " + " ".join(hints)


def _clip_for_demo() -> str | None:
    """The demo runs offline: with no CLIP checkpoint at hand it switches the CLIP metrics
    off (recorded as not computed in the results) and says so, instead of failing.
    Returns the setting to use (``none``) or None to keep the configured one."""
    from lmms_scene import settings
    from lmms_scene.metrics import clip

    if settings.current().clip_model_explicit or clip.default_model_cached():
        return None
    print(
        f"lmms-scene demo: {clip.DEFAULT_CLIP_MODEL} is not in the local Hugging Face cache, so COOCO's "
        "CLIP metrics (RefCLIPScore, accuracy, output-scene similarity, context capture) are recorded as "
        "not computed. Download it once (`huggingface-cli download "
        f"{clip.DEFAULT_CLIP_MODEL}`) or set {clip.CLIP_MODEL_ENV}=<local CLIP folder> to compute them."
    )
    return clip.CLIP_DISABLED


def demo(output_path: str | Path = "results", extra: list[str] | None = None) -> int:
    """Every built benchmark's sample tasks with the ``scene_blind`` baseline, then the
    readable tables of the results (``lmms-scene show``)."""
    import contextlib

    from lmms_scene import benchmarks, settings

    for bench in benchmarks.BENCHMARKS:
        if not bench.built():
            print(f"lmms-scene demo: {bench.title} is not built yet in this version; skipping it.")
    tasks = [t for bench in benchmarks.built() for t in bench.sample_tasks]
    if not tasks:
        print("lmms-scene demo: no benchmark is built yet; nothing to run.", file=sys.stderr)
        return 1
    clip_setting = _clip_for_demo()
    out = Path(output_path).resolve()
    started = time.time()
    scope = settings.override(clip_model=clip_setting) if clip_setting else contextlib.nullcontext()
    with scope:
        code = run_harness(
            ["--model", "scene_blind", "--tasks", ",".join(tasks), "--output_path", str(out), "--log_samples", *(extra or [])]
        )
    if code != 0:
        return code
    written = sorted(p for p in out.rglob("*_results.json") if p.stat().st_mtime >= started - 1)
    if not written:
        print(f"lmms-scene demo: the harness wrote no results under {out}", file=sys.stderr)
        return 1
    from lmms_scene.results import show_text

    run_dir = written[-1].parent
    text, _ = show_text([written[-1]])
    print(f"\n{text}\n")
    print(f"lmms-scene demo: ran {', '.join(tasks)} with scene_blind; results: {written[-1]}")
    print(f"lmms-scene demo: print these tables again with `lmms-scene show {run_dir}`")
    _report_and_submission(run_dir)
    return 0


def _report_and_submission(run_dir: Path) -> None:
    """The demo's last step: the HTML report of the run, and the leaderboard submission
    it would make, which is refused (sample splits are not the benchmarks) with its reasons."""
    import json

    from lmms_scene.report import build_report
    from lmms_scene.report.submission import Refused, build

    info = build_report([run_dir], run_dir / "report" / "report.html")
    print(f"lmms-scene demo: report: {info.out} (tables as Markdown: {info.markdown})")
    target = run_dir / "submission.json"
    try:
        submission = build([run_dir])
    except Refused as refused:
        reasons = run_dir / "submission_refused.txt"
        reasons.write_text("\n".join(refused.reasons) + "\n", encoding="utf-8")
        print(f"lmms-scene demo: no leaderboard submission, as expected for sample splits ({reasons}):")
        for reason in refused.reasons:
            print(f"  - {reason}")
        return
    target.write_text(json.dumps(submission, indent=2) + "\n", encoding="utf-8")
    print(f"lmms-scene demo: submission: {target}")


def rescore(run: str | Path, output_path: str | Path, extra: list[str] | None = None) -> int:
    """Recompute every metric of a saved run (its ``--log_samples`` files) without the
    model: the harness replays the logged answers (``scene_from_samples``) through the
    tasks' own ``process_results`` and aggregations, on the same data and ``--limit``.
    The metric checkpoints are the configured ones (e.g. ``LMMS_SCENE_CLIP_MODEL``)."""
    import json

    from lmms_scene.models.from_samples import samples_files, task_of_samples_file

    files = samples_files(run)
    tasks = [task_of_samples_file(f) for f in files]
    # the --limit of the run these samples files come from: the results JSON beside them
    limits = set()
    for f in files:
        prefix = f.name.split("_samples_", 1)[0]
        results = f.with_name(f"{prefix}_results.json")
        if results.is_file():
            limits.add(json.loads(results.read_text(encoding="utf-8")).get("config", {}).get("limit"))
    if len(limits) > 1:
        raise ValueError(f"the samples files come from runs with different --limit ({sorted(map(str, limits))}); rescore one run at a time")
    limit = ["--limit", str(next(iter(limits)))] if limits and next(iter(limits)) is not None else []
    print(f"lmms-scene rescore: replaying {', '.join(tasks)} from {', '.join(map(str, files))}")
    return run_harness(
        ["--model", "scene_from_samples", "--model_args", "samples=" + "|".join(map(str, files)),
         "--tasks", ",".join(tasks), "--output_path", str(output_path), "--log_samples", *limit, *(extra or [])]
    )  # fmt: skip
