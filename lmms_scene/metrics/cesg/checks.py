"""Checks that CESG means what the paper means on text written the way models write:
the negation reader against a labelled set, the paper's Q3-Q6 examples, and a ranking
check (a correct answer, however it is phrased, must outscore a wrong-object answer and
the affirmative caption). ``python -m lmms_scene.metrics.cesg.checks [LABELLED.jsonl]``
prints the figures docs/snus.md reports; tests/test_snus_fidelity.py asserts them.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmms_scene.files import iter_jsonl
from lmms_scene.metrics.cesg import KEYS, cesg_score
from lmms_scene.metrics.cesg.match import elements, verbalise
from lmms_scene.metrics.cesg.negation import strip_negation
from lmms_scene.metrics.cesg.score import cesg_graph

#: the labelled negative/affirmative sentences (written for lmms-scene, tests/data/)
LABELLED = Path(__file__).resolve().parents[3] / "tests" / "data" / "snus_negation_labelled.jsonl"


def read_labelled(path: Path | str = LABELLED) -> list[dict[str, Any]]:
    """Rows ``{"text", "negative": bool, "absent": [words], "kind"}``; errors name the line."""
    rows = []
    for n, row in iter_jsonl(Path(path)):
        if not isinstance(row.get("text"), str) or not isinstance(row.get("negative"), bool):
            raise ValueError(f"{path}, line {n}: expected a string 'text' and a boolean 'negative', got {row!r:.200}")
        rows.append(row)
    return rows


def read(text: str, **options: Any) -> dict[str, Any]:
    """What CESG reads in one text: whether it states absent information, and the
    verbalised absent elements (objects, negated attributes, negated relations)."""
    c = cesg_graph(text, **options)
    els = [verbalise(e) for items in elements(c.cesg).values() for e in items]
    return {"negative": c.cesg.has_absent_information(), "elements": els, "failures": len(c.failures)}


def labelled_agreement(path: Path | str = LABELLED, **options: Any) -> dict[str, Any]:
    """Polarity agreement (reader's negative/affirmative vs the label) over every sentence;
    element agreement over the negative sentences with labelled ``absent`` words (each word
    found in some read element); per kind; the disagreements listed."""
    rows = read_labelled(path)
    per_kind: dict[str, Counter] = {}
    wrong, element_wrong, element_n = [], [], 0
    for row in rows:
        got = read(row["text"], **options)
        kind = per_kind.setdefault(row.get("kind", "?"), Counter())
        kind["n"] += 1
        ok = got["negative"] == row["negative"]
        kind["agree"] += ok
        if not ok:
            wrong.append({"text": row["text"], "label": row["negative"], "read": got["elements"]})
        if ok and row["negative"] and row.get("absent"):
            element_n += 1
            if not all(any(w in e for e in got["elements"]) for w in row["absent"]):
                element_wrong.append({"text": row["text"], "expected": row["absent"], "read": got["elements"]})
    n = len(rows)
    return {
        "n": n,
        "n_negative": sum(r["negative"] for r in rows),
        "polarity_agreement": (n - len(wrong)) / n if n else None,
        "element_agreement": (element_n - len(element_wrong)) / element_n if element_n else None,
        "n_element_checked": element_n,
        "per_kind": {k: {"n": c["n"], "agreement": c["agree"] / c["n"]} for k, c in sorted(per_kind.items())},
        "disagreements": wrong,
        "element_disagreements": element_wrong,
    }


# -- the paper's Q3-Q6 (our wording of the situations its Figure 3 describes) -------------

PAPER_EXAMPLES: tuple[dict[str, Any], ...] = (
    {
        "q": "Q3",
        "what": "the same object described differently (coreference across captions)",
        "reference": "The fire box beside the worker on the ground has no hose.",
        "predictions": {"same object, other description": "The fire box near the wall has no hose."},
    },
    {
        "q": "Q4",
        "what": "interchangeable relation and attribute (cross-type, interactive matching)",
        "reference": "The worker's eyes are not protected.",
        "predictions": {"relation for the attribute": "The man not wearing goggles is cutting metal."},
        "options": ({}, {"lambda_": 0.25}),
    },
    {
        "q": "Q5",
        "what": "one plural statement for per-person references (homogeneous merging)",
        "reference": "The man on the left is not wearing a hard hat. The man on the right is not wearing a hard hat.",
        "predictions": {"plural": "Neither of these individuals is wearing a safety hat."},
    },
    {
        "q": "Q6",
        "what": "a missing helmet anchored to the right worker",
        "reference": "The worker standing on the scaffolding is not wearing a safety helmet. The worker on the ground is wearing a safety helmet.",
        "predictions": {
            "right worker": "The worker on the scaffolding is not wearing a helmet.",
            "wrong worker": "The worker on the ground is not wearing a helmet.",
            "worker not said": "A worker is not wearing a helmet.",
        },
    },
)


def paper_examples() -> list[dict[str, Any]]:
    """CESG and its parts for each Q3-Q6 prediction (and option set)."""
    out = []
    for ex in PAPER_EXAMPLES:
        for opts in ex.get("options", ({},)):
            for label, pred in ex["predictions"].items():
                s = cesg_score(pred, ex["reference"], **opts)
                out.append(
                    {"q": ex["q"], "prediction": label, "text": pred, "options": opts, **{k: s[k] for k in KEYS}}
                )
    return out


# -- ranking: a right answer must beat a wrong one, whatever its phrasing -----------------

RANKING: tuple[dict[str, Any], ...] = (
    {
        "reference": "There is no fire extinguisher.",
        "correct": {
            "hedged": "There does not appear to be a fire extinguisher.",
            "terse": "No fire extinguisher.",
            "list": "Fire extinguisher: absent",
            "verbose": "Looking at the image carefully, I can see a workshop with benches and tools, but I cannot see any fire extinguisher anywhere in the room.",
            "lexical": "The site lacks a fire extinguisher.",
        },
        "wrong": "There is no ladder.",
    },
    {
        "reference": "The worker on the scaffold is not wearing a hard hat. There is no guardrail.",
        "correct": {
            "hedged": "The worker on the scaffold does not seem to be wearing a hard hat, and there doesn't appear to be a guardrail.",
            "terse": "No hard hat. No guardrail.",
            "list": "Missing safety items:\n- hard hat\n- guardrail",
            "verbose": "The image shows a construction site. A worker is standing on the scaffold. He is not wearing a hard hat, and the scaffold has no guardrail along its edge.",
            "lexical": "The worker on the scaffold is helmetless and the scaffold lacks a guardrail.",
        },
        "wrong": "The worker is not wearing gloves. There is no traffic cone.",
    },
    {
        "reference": "The ladder is not secured. The welder is not wearing a face shield.",
        "correct": {
            "hedged": "The ladder does not appear to be secured, and the welder doesn't seem to have a face shield.",
            "terse": "Ladder unsecured; welder without face shield.",
            "list": "1. Ladder: not secured\n2. Face shield: missing",
            "verbose": "In this workshop a welder is working at a bench. I notice that the welder is not wearing a face shield, and the ladder leaning on the wall is not secured.",
            "lexical": "The ladder is unsecured and the welder lacks a face shield.",
        },
        "wrong": "There is no fire extinguisher and the floor is not dry.",
    },
    {
        "reference": "Neither worker is wearing a safety harness. There is no safety net below the roof.",
        "correct": {
            "hedged": "It appears that neither worker is wearing a safety harness, and there does not seem to be a safety net below the roof.",
            "terse": "No harnesses, no safety net.",
            "list": "- Safety harness: not worn\n- Safety net: none",
            "verbose": "Two roofers are working near the edge of the roof. None of the workers are wearing a safety harness, and I cannot see any safety net below the roof.",
            "lexical": "The roofers work without safety harnesses and the roof lacks a safety net.",
        },
        "wrong": "The workers are not wearing gloves. There is no warning sign.",
    },
)


def ranking() -> list[dict[str, Any]]:
    """For each reference: CESG of every correct phrasing, of the wrong-object answer and
    of the affirmative caption (the reference with negation stripped)."""
    out = []
    for case in RANKING:
        ref = case["reference"]
        row = {"reference": ref, "correct": {k: cesg_score(v, ref)["CESG"] for k, v in case["correct"].items()}}
        row["wrong"] = cesg_score(case["wrong"], ref)["CESG"]
        row["affirmative"] = cesg_score(strip_negation(ref), ref)["CESG"]
        row["ranked_right"] = min(row["correct"].values()) > max(row["wrong"], row["affirmative"])
        out.append(row)
    return out


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else LABELLED
    res = labelled_agreement(path)
    print(f"labelled set {path.name}: {res['n']} sentences ({res['n_negative']} negative)")
    print(
        f"polarity agreement {res['polarity_agreement']:.4f}; element agreement {res['element_agreement']:.4f} over {res['n_element_checked']}"
    )
    for k, v in res["per_kind"].items():
        print(f"  {k}: {v['n']} sentences, agreement {v['agreement']:.3f}")
    for d in res["disagreements"] + res["element_disagreements"]:
        print("  disagreement:", json.dumps(d))
    print("\npaper examples:")
    for e in paper_examples():
        parts = " ".join(
            f"{k} {_fmt(e[k])}" for k in ("P_o", "R_o", "F1_o", "P_a", "R_a", "F1_a", "P_r", "R_r", "F1_r", "CESG")
        )
        print(f"  {e['q']} {e['prediction']} {e['options'] or ''}: {parts}")
    print("\nranking:")
    for r in ranking():
        cells = ", ".join(f"{k} {_fmt(v)}" for k, v in r["correct"].items())
        print(
            f"  {r['reference']!r}: {cells}; wrong {_fmt(r['wrong'])}; affirmative {_fmt(r['affirmative'])}; ranked right: {r['ranked_right']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
