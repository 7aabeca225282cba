"""How long ``lmms-scene leaderboard`` takes beside hostile files (issue 31): a folder with
one submission copied N times, a ``*.json`` symlink to /dev/zero, a FIFO named ``x.json``
and a 100,000-deep nesting, timed against the same folder without the hostile files.

    python bench/bench_leaderboard.py SUBMISSION.json --official OFFICIAL.json [--copies 3]

SUBMISSION.json: one written by ``lmms-scene submit`` (e.g. from ``make demo``'s runs with
an ``--official`` file); OFFICIAL.json: the ``--official`` file that vouches for its data.
Prints seconds per build (the first one also loads the scorers the board re-derives
with) and the hostile/plain ratio of the warm builds (one run, same machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from lmms_scene.report import leaderboard


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submission", type=Path)
    ap.add_argument("--official", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=3)
    a = ap.parse_args()
    official = json.loads(a.official.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        plain, hostile = Path(tmp) / "plain", Path(tmp) / "hostile"
        for folder in (plain, hostile):
            folder.mkdir()
            for k in range(a.copies):
                shutil.copy(a.submission, folder / f"sub{k}.json")
        (hostile / "zero.json").symlink_to("/dev/zero")
        os.mkfifo(hostile / "x.json")
        (hostile / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        times = {}
        # the first build loads the re-deriving pipelines (spaCy, MiniLM, WordNet, CLIP): timed apart
        for name, folder in (("cold (first build: loads the scorers)", plain), ("plain", plain), ("hostile", hostile)):
            start = time.perf_counter()
            board = leaderboard.build(folder, official=official)
            times[name] = time.perf_counter() - start
            print(
                f"{name}: {times[name]:.2f} s, {board.n_valid} ranked, {len(board.invalid)} refused: "
                + "; ".join(f"{r.file}: {r.reasons[0][:60]}" for r in board.invalid)
            )
        print(f"hostile / plain: {times['hostile'] / times['plain']:.2f}")


if __name__ == "__main__":
    main()
