"""``submit`` and ``leaderboard``: leaderboard submission files and the ranked leaderboard.

- ``submit RESULTS... --out submission.json``: one model's results as a submission
  (schema: ``lmms_scene/report/submission.schema.json``, docs/reports.md). Refused, with
  every reason and exit status 2, for a ``--limit`` run, a sample split, or unreported
  failures (empty outputs over ``--max-empty-rate``, unscored rows, judge failures).
- ``leaderboard SUBMISSIONS_DIR --out leaderboard.md|.html``: validates every ``*.json``
  in the folder (invalid ones listed with their reasons) and ranks the models per benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    from lmms_scene.report.submission import MAX_EMPTY_RATE

    s = sub.add_parser("submit", help="write a leaderboard submission from lmms-eval results", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    s.add_argument("results", nargs="+", type=Path, help="lmms-eval results folders or *_results.json files (one model)")
    s.add_argument("--out", required=True, type=Path, help="submission JSON to write")
    s.add_argument("--max-empty-rate", type=float, default=MAX_EMPTY_RATE,
                   help=f"refuse when more than this share of a task's outputs is empty (default {MAX_EMPTY_RATE})")  # fmt: skip
    s.set_defaults(fn=_submit, command_name="submit")

    b = sub.add_parser("leaderboard", help="validate submissions and rank models per benchmark", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    b.add_argument("submissions", type=Path, help="folder of submission JSON files")
    b.add_argument("--out", required=True, type=Path, help="leaderboard.md or leaderboard.html")
    b.set_defaults(fn=_leaderboard, command_name="leaderboard")


def _submit(a) -> int:
    from lmms_scene.report import submission

    try:
        sub = submission.build(a.results, max_empty_rate=a.max_empty_rate)
    except submission.Refused as exc:
        print(f"lmms-scene submit: refused: no submission written to {a.out}, because:", file=sys.stderr)
        for reason in exc.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return 2
    path = submission.write(sub, a.out)
    benches = ", ".join(f"{b} ({e['headline']} = {e['metrics'][e['headline']]['value']:.4f})" for b, e in sub["benchmarks"].items())
    print(f"wrote {path}: {sub['model']['name']} on {benches}")
    return 0


def _leaderboard(a) -> int:
    from lmms_scene.report import leaderboard

    board = leaderboard.build(a.submissions)
    path = leaderboard.write(board, a.out)
    for file, reasons in board.invalid:
        print(f"lmms-scene leaderboard: invalid submission {file} (not ranked): {'; '.join(reasons)}", file=sys.stderr)
    ranked = sum(len(v) for v in board.ranked.values())
    print(f"wrote {path}: {ranked} ranked entries over {len(board.ranked)} benchmarks; {len(board.invalid)} invalid submissions")
    return 0 if board.n_valid else 2
