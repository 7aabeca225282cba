"""``show PATH...``: the readable tables of every lmms-scene benchmark in results files.

PATH is a results JSON, a samples JSONL, or a folder holding them (searched
recursively). Each benchmark prints its own layout (COOCO: the paper's Figures 3-4 with
n and a 95% interval per cell); tasks that belong to no lmms-scene benchmark and files
that cannot be read are listed at the end.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from lmms_scene.report.text import show_text


def register(sub) -> None:
    p = sub.add_parser("show", help="print the readable tables of results files or folders", description=__doc__)
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="results JSON, samples JSONL, or a folder")
    p.add_argument(
        "--width",
        type=int,
        default=None,
        help="no line longer than this (wide tables are cut into column blocks); 0: no limit "
        "(default: the terminal's width, or COLUMNS when set; 160 when output is not a terminal)",
    )
    p.set_defaults(fn=_show)


def terminal_width(default: int = 160) -> int:
    """The width ``show`` fits its lines to: ``COLUMNS`` when set, else the terminal's,
    else ``default`` (output piped to a file or another program)."""
    return shutil.get_terminal_size((default, 24)).columns


def _show(args) -> int:
    width = terminal_width() if args.width is None else args.width
    if width < 0:
        raise ValueError(f"--width: {width} is negative (0: no limit)")
    text, code = show_text(args.paths, width=width or None)
    print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code
