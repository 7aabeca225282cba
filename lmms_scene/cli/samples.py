"""``build-samples``: regenerate the embedded sample splits."""

from __future__ import annotations

from lmms_scene import benchmarks
from lmms_scene.data.samples import build_samples


def register(sub) -> None:
    p = sub.add_parser("build-samples", help="regenerate the embedded sample splits")
    p.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCH",
        help=f"benchmarks to build (default: every one with a sample builder; known: {', '.join(benchmarks.names())})",
    )
    p.set_defaults(fn=_build_samples)


def _build_samples(args) -> int:
    for bench, paths in build_samples(args.benchmarks or None).items():
        for path in paths:
            print(f"{bench}: wrote {path}")
    return 0
