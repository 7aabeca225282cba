"""``lmms-scene``: a thin command line over the library.

    lmms-scene tasks-path                 the folder to pass to lmms_eval --include_path
    lmms-scene eval <lmms_eval args>      run the harness with our tasks; non-zero exit on failure
    lmms-scene demo [--output_path DIR]   the three benchmarks' sample splits with the blind baseline
    lmms-scene build-samples [BENCH ...]  regenerate the embedded sample splits
    lmms-scene build BENCH [args]         build a benchmark's dataset from its original release
    lmms-scene pfram extract|score|correlate [args]
"""

from __future__ import annotations

import argparse
import importlib
import sys

from lmms_scene import __version__


def cmd_tasks_path(_args: argparse.Namespace, _rest: list[str]) -> int:
    from lmms_scene.registration import tasks_path

    print(tasks_path())
    return 0


def cmd_eval(_args: argparse.Namespace, rest: list[str]) -> int:
    from lmms_scene.evaluate import run_harness

    return run_harness(rest)


def cmd_demo(args: argparse.Namespace, rest: list[str]) -> int:
    from lmms_scene.evaluate import demo

    return demo(args.output_path, extra=rest)


def cmd_build_samples(args: argparse.Namespace, _rest: list[str]) -> int:
    from lmms_scene.data.samples import build_samples

    for bench, paths in build_samples(args.benchmarks or None).items():
        for path in paths:
            print(f"{bench}: wrote {path}")
    return 0


def _delegate(module: str, argv: list[str]) -> int:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        print(f"lmms-scene: {module} is not part of this version of lmms-scene", file=sys.stderr)
        return 2
    return int(mod.main(argv) or 0)


def cmd_build(args: argparse.Namespace, rest: list[str]) -> int:
    return _delegate(f"lmms_scene.data.{args.benchmark}", rest)


def cmd_pfram(_args: argparse.Namespace, rest: list[str]) -> int:
    return _delegate("lmms_scene.analysis.pfram_cli", rest)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lmms-scene", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"lmms-scene {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("tasks-path", help="print the task folder for lmms_eval --include_path").set_defaults(fn=cmd_tasks_path)
    sub.add_parser("eval", help="run lmms_eval with lmms-scene's tasks (all lmms_eval arguments pass through)", add_help=False).set_defaults(fn=cmd_eval)
    demo = sub.add_parser("demo", help="run every benchmark's sample split with the scene_blind baseline")
    demo.add_argument("--output_path", default="results", help="where lmms-eval writes results (default: results/)")
    demo.set_defaults(fn=cmd_demo)
    bs = sub.add_parser("build-samples", help="regenerate the embedded sample splits")
    bs.add_argument("benchmarks", nargs="*", help="benchmarks to build (default: all that have a sample builder)")
    bs.set_defaults(fn=cmd_build_samples)
    build = sub.add_parser("build", help="build a benchmark dataset from its original release", add_help=False)
    build.add_argument("benchmark", choices=["cooco", "snus", "layered_vqa"])
    build.set_defaults(fn=cmd_build)
    sub.add_parser("pfram", help="Pfram feature extraction, scoring and correlation", add_help=False).set_defaults(fn=cmd_pfram)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = parser().parse_known_args(argv)
    # Subcommands that pass arguments through get everything after their name.
    if args.command in ("eval", "pfram"):
        rest = argv[argv.index(args.command) + 1 :]
    elif args.command == "build":
        rest = argv[argv.index(args.benchmark, argv.index("build") + 1) + 1 :]
    elif rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    return args.fn(args, rest)


if __name__ == "__main__":
    sys.exit(main())
