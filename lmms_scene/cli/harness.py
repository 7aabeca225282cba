"""``tasks-path``, ``eval`` and ``demo``: running the harness with our tasks."""

from __future__ import annotations

from pathlib import Path

from lmms_scene import evaluate
from lmms_scene.evaluate import demo, rescore
from lmms_scene.registration import tasks_path


def register(sub) -> None:
    p = sub.add_parser("tasks-path", help="print the task folder for lmms_eval --include_path")
    p.set_defaults(fn=_tasks_path)

    p = sub.add_parser(
        "eval",
        help="run lmms_eval with lmms-scene's tasks (every lmms_eval argument passes through)",
        usage="lmms-scene eval --model MODEL --tasks TASKS [lmms_eval arguments]  (lmms-scene eval --help: the harness's help)",
        add_help=False,
    )
    p.set_defaults(fn=_eval, parser=p, passthrough=True)

    p = sub.add_parser(
        "demo",
        help="run every built benchmark's sample split with the scene_blind baseline",
        description="Run every built benchmark's sample split with scene_blind, then print the tables. "
        "Arguments it does not know pass to lmms_eval (e.g. --limit 2).",
    )
    p.add_argument(
        "--output_path", "--output-path", default="results", help="where lmms-eval writes results (default: results/)"
    )
    p.set_defaults(fn=_demo, passthrough=True)

    p = sub.add_parser(
        "rescore",
        help="recompute every metric of a saved run from its samples files, without the model",
        description="Replay a saved run's logged answers (its --log_samples files) through the tasks' own scoring, "
        "so every metric is recomputed on the same data without the model. Arguments it does not know pass to lmms_eval.",
    )
    p.add_argument("run", type=Path, help="the run's output folder, or samples files (*_samples_<task>.jsonl)")
    p.add_argument(
        "--output_path", "--output-path", required=True, type=Path, help="where to write the rescored results"
    )
    p.set_defaults(fn=_rescore, passthrough=True)


def _tasks_path(_args) -> int:
    print(tasks_path())
    return 0


def _eval(args) -> int:
    if not args.harness_args:
        args.parser.print_usage()
        print("lmms-scene eval: error: give lmms_eval arguments, at least --model and --tasks")
        return 2
    return evaluate.run_harness(args.harness_args)


def _demo(args) -> int:
    return demo(Path(args.output_path), extra=args.harness_args)


def _rescore(args) -> int:
    return rescore(args.run, args.output_path, extra=args.harness_args)
