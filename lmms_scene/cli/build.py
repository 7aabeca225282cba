"""``build NAME``: build a benchmark's dataset from its original release.

Each benchmark's command module registers its own ``build`` sub-command through
``register_build(subparsers)``.
"""

from __future__ import annotations

from lmms_scene.cli import command_modules


def register(sub) -> None:
    p = sub.add_parser("build", help="build a benchmark dataset from its original release")
    builds = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for module in command_modules():
        hook = getattr(module, "register_build", None)
        if hook is not None:
            hook(builds)
