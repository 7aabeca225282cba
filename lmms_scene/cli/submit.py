"""``submit`` and ``leaderboard``: leaderboard submission files and the ranked leaderboard.

- ``submit RESULTS... --out submission.json``: one model's results as a submission
  (schema: docs/submission.schema.json; docs/reports.md), carrying the per-row fields its
  headline follows from. Refused, with every reason and exit status 2, for a ``--limit``
  run, a sample split, a run without logged samples, results and samples that disagree,
  an untested harness, data nobody vouches for (the refusal prints the ``--official``
  file that would), or unreported failures
  (empty outputs over ``--max-empty-rate``, unscored rows, judge failures).
- ``leaderboard SUBMISSIONS_DIR --out leaderboard.md|.html``: checks every ``*.json`` in
  the folder (regular files only; the data vouched for by fingerprint; every row once;
  scores re-derived from the outputs; the numbers recomputed from its rows; ranking
  metric, directions and ranges from the registry; refused ones listed with their
  reasons) and ranks the models per benchmark, runs on different data never together.
  ``--official FILE``: a JSON object ``{benchmark: [fingerprint, ...]}``: the data this
  leaderboard's operator vouches for, beyond the fingerprints lmms-scene registers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_scene.files import read_json
from lmms_scene.report import leaderboard, submission
from lmms_scene.report.submission import MAX_EMPTY_RATE


def register(sub) -> None:
    s = sub.add_parser(
        "submit",
        help="write a leaderboard submission from lmms-eval results",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "results", nargs="+", type=Path, help="lmms-eval results folders or *_results.json files (one model)"
    )
    s.add_argument("--out", required=True, type=Path, help="submission JSON to write")
    s.add_argument(
        "--max-empty-rate",
        type=float,
        default=MAX_EMPTY_RATE,
        help=f"refuse when more than this share of a task's outputs is empty (default {MAX_EMPTY_RATE})",
    )
    s.add_argument(
        "--official", type=Path, default=None, help="JSON {benchmark: [fingerprint, ...]} of accepted releases"
    )
    s.set_defaults(fn=_submit, command_name="submit")

    b = sub.add_parser(
        "leaderboard",
        help="check submissions and rank models per benchmark",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("submissions", type=Path, help="folder of submission JSON files")
    b.add_argument("--out", required=True, type=Path, help="leaderboard.md or leaderboard.html")
    b.add_argument(
        "--official", type=Path, default=None, help="JSON {benchmark: [fingerprint, ...]} of accepted releases"
    )
    b.add_argument(
        "--max-empty-rate",
        type=float,
        default=MAX_EMPTY_RATE,
        help=f"refuse a submission whose rows hold more empty outputs than this share (default {MAX_EMPTY_RATE})",
    )
    b.set_defaults(fn=_leaderboard, command_name="leaderboard")


def read_official(path: Path | None) -> dict[str, list[str]] | None:
    """The ``--official`` file: ``{benchmark: [fingerprint, ...]}`` (errors name the file)."""
    if path is None:
        return None
    try:
        data = read_json(path, allow_nan=False)  # repeated keys, absurd numbers refused, naming the line
    except (OSError, ValueError) as exc:
        raise ValueError(f"--official {path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v) for k, v in data.items()
    ):
        raise ValueError(f"--official {path}: expected an object {{benchmark: [fingerprint, ...]}}")
    return data


def _submit(a) -> int:
    if a.out.is_dir():
        raise ValueError(
            f"--out: {a.out} is a folder; give the submission's file name (e.g. {a.out / 'submission.json'})"
        )
    try:
        sub = submission.build(a.results, max_empty_rate=a.max_empty_rate, official=read_official(a.official))
    except submission.Refused as exc:
        print(f"lmms-scene submit: refused: no submission written to {a.out}, because:", file=sys.stderr)
        for reason in exc.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return 2
    path = submission.write(sub, a.out)
    benches = ", ".join(
        f"{b} ({e['headline']} = {e['metrics'][e['headline']]['value']:.4f})" for b, e in sub["benchmarks"].items()
    )
    print(f"wrote {path}: {sub['model']['name']} on {benches}")
    return 0


def _leaderboard(a) -> int:
    if a.out.is_dir():
        raise ValueError(f"--out: {a.out} is a folder; give a file name ending in .md or .html")
    board = leaderboard.build(a.submissions, official=read_official(a.official), max_empty_rate=a.max_empty_rate)
    path = leaderboard.write(board, a.out)
    for refusal in board.invalid:
        print(
            f"lmms-scene leaderboard: refused submission {leaderboard.shown(refusal.file)} (not ranked): "
            f"{'; '.join(leaderboard.shown(r) for r in refusal.reasons)}",
            file=sys.stderr,
        )
        for bench, hint in refusal.hints.items():
            print(
                f"  to vouch for its {bench} data (if you know it is the benchmark's): --official FILE, FILE holding {hint}",
                file=sys.stderr,
            )
    ranked = sum(len(g.entries) for gs in board.groups.values() for g in gs)
    print(
        f"wrote {path}: {ranked} ranked entries over {len(board.groups)} benchmarks; {len(board.invalid)} refused submissions"
    )
    return 0 if board.n_valid else 2
