"""``report RESULTS... --out report.html``: one self-contained HTML page comparing models.

RESULTS are lmms-eval results folders or files, one per model (the ``scene_blind``
baseline included when given). The page shows COOCO's Figures 3-4 (RefCLIPScore and
accuracy by relatedness x noise area x level), output-scene similarity and context
capture, SNUS's Table 2, Layered-VQA's Table 1 with the evidence, grounding and
question-type tables, and Pfram per layer for every ``--pfram`` score file (the output of
``lmms-scene pfram score --output FILE``). Every number carries the 95% interval the
results hold and every table says what computed it. ``report.md`` and ``tables/*.csv``
are written beside the page. Inputs that cannot be used are listed with the reason, in
the page and here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_scene.report.html import build_report


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report comparing results",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="*", type=Path, metavar="RESULTS", help="results folder or file (one per model)")
    p.add_argument(
        "--out", required=True, type=Path, help="the HTML file to write (report.md and tables/ go beside it)"
    )
    p.add_argument(
        "--pfram",
        nargs="+",
        default=[],
        type=Path,
        metavar="SCORES.json",
        help="Pfram score files written by `lmms-scene pfram score --output`",
    )
    p.add_argument("--title", default="lmms-scene report")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace files at --out (and report.md, tables/ beside it) that an lmms-scene report did not write",
    )
    p.set_defaults(fn=_report, command_name="report")


def _report(a) -> int:
    info = build_report(a.results, a.out, pfram=a.pfram, title=a.title, progress=True, overwrite=a.overwrite)
    for note in info.mixture:
        print(f"lmms-scene report: NOTE: {note}", file=sys.stderr)
    for path in info.replaced:
        print(f"lmms-scene report: replaced {path} (written by an earlier lmms-scene report)", file=sys.stderr)
    for path, why in info.skipped:
        print(f"lmms-scene report: skipped {path}: {why}", file=sys.stderr)
    print(
        f"lmms-scene report: {info.out} ({info.n_tables} tables, {info.n_plots} plots; models: "
        f"{', '.join(info.models) or '-'}); {info.markdown}; {len(info.csv)} CSV files in {info.out.parent / 'tables'}"
    )
    return 0
