"""Does CESG rank a right answer above a wrong one? Triples of (reference, a correct
answer written the way vision-language models write, a wrong answer naming the wrong
object or the wrong entity), scored with :func:`~lmms_scene.metrics.cesg.cesg_score`.

``python -m lmms_scene.metrics.cesg.triples [TRIPLES.jsonl]`` prints how often the correct
answer wins, the margins (correct minus wrong CESG: median and minimum) and every triple;
docs/snus.md reports the figures and tests/test_cesg_triples.py asserts them.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmms_scene.files import iter_jsonl
from lmms_scene.metrics.cesg.score import score_corpus

#: the triples written for lmms-scene (tests/data/)
TRIPLES = Path(__file__).resolve().parents[3] / "tests" / "data" / "snus_ranking_triples.jsonl"
_FIELDS = ("reference", "correct", "wrong_answer")


def read_triples(path: Path | str = TRIPLES) -> list[dict[str, Any]]:
    """Rows ``{"id", "style", "wrong": "object" | "entity", "reference", "correct",
    "wrong_answer"}``; an error names the line and the field."""
    rows = []
    for n, row in iter_jsonl(Path(path)):
        for key in _FIELDS:
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ValueError(
                    f"{path}, line {n}: field {key!r}: expected a non-empty string, got {row.get(key)!r:.200}"
                )
        rows.append(row)
    return rows


def rank_triples(rows: Sequence[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """CESG of each triple's correct and wrong answer (one :func:`score_corpus` call), the
    win rate (correct strictly above wrong), ties, losses and the margins' median and
    minimum, overall and per kind of wrong answer."""
    pairs = [(f"{r['id']}:c", r["correct"], [r["reference"]]) for r in rows]
    pairs += [(f"{r['id']}:w", r["wrong_answer"], [r["reference"]]) for r in rows]
    scored = {row["id"]: row["CESG"] for row in score_corpus(pairs, **options)["rows"]}
    out_rows = []
    for r in rows:
        c, w = scored[f"{r['id']}:c"] or 0.0, scored[f"{r['id']}:w"] or 0.0
        out_rows.append(
            {
                "id": r["id"],
                "style": r.get("style"),
                "wrong": r.get("wrong"),
                "correct_CESG": c,
                "wrong_CESG": w,
                "margin": c - w,
            }
        )

    def summary(sel: list[dict[str, Any]]) -> dict[str, Any]:
        margins = [x["margin"] for x in sel]
        return {
            "n": len(sel),
            "wins": sum(m > 0 for m in margins),
            "ties": sum(m == 0 for m in margins),
            "losses": sum(m < 0 for m in margins),
            "win_rate": sum(m > 0 for m in margins) / len(sel) if sel else None,
            "median_margin": statistics.median(margins) if sel else None,
            "min_margin": min(margins) if sel else None,
        }

    kinds = sorted({x["wrong"] for x in out_rows if x["wrong"]})
    return {
        **summary(out_rows),
        "per_wrong_kind": {k: summary([x for x in out_rows if x["wrong"] == k]) for k in kinds},
        "rows": out_rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else TRIPLES
    res = rank_triples(read_triples(path))
    for x in res["rows"]:
        print(
            f"  {x['id']} {x['wrong']:6} {x['style']:22} correct {x['correct_CESG']:.3f} wrong {x['wrong_CESG']:.3f} margin {x['margin']:+.3f}"
        )
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
