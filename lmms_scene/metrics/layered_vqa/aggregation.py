"""Layered-VQA's aggregation of scored rows: retained accuracy (the headline, Table 1),
the breakdowns (Tables 2-8), the attempt curve, loss concentration, restoration and
reliability, :func:`report`; every number through :mod:`lmms_scene.metrics.rows`, with a
95% percentile bootstrap interval resampled over scenes (``cluster="scene_id"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.data.layered_vqa.schema import QUESTION_TYPES
from lmms_scene.metrics import rows as R
from lmms_scene.metrics.layered_vqa import scoring
from lmms_scene.metrics.layered_vqa.scoring import LENGTH_BINS, POSITION_BINS

# -- aggregation ---------------------------------------------------------------------------------

CLUSTER = "scene_id"
#: what identifies the data a row scored (never the output): the item (a question of a
#: scene; schedules and repeats are views of it) and its text, gold and type. The report's
#: ``dataset`` fingerprint covers these (:func:`lmms_scene.metrics.rows.dataset_identity`),
#: so the 16 schedule tasks of one dataset share it
ITEM_FIELDS: tuple[str, ...] = scoring.ITEM_FIELDS
DATA_FIELDS: tuple[str, ...] = scoring.DATA_FIELDS


def _na(field: str, cond: Callable[[Mapping[str, Any]], bool]) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if cond(r) else R.NOT_APPLICABLE


def _f(field: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if field in r else R.NOT_APPLICABLE


ACCURACY = {"accuracy": _f("correct"), "empty_output_rate": _f("empty"), "cannot_tell_rate": _f("cannot_tell")}
SELECTION_METRICS = {
    "precision": _f("precision"),
    "recall": _f("recall"),
    "f1": _f("f1"),
    "exact_match": _f("exact"),
    "complete": _f("complete"),
    "excess": _f("excess"),
    "distractor": _f("distractor"),
    "invalid": _f("invalid"),
    "joint_accuracy": _f("joint"),
}
GROUNDING = {
    "attempted": lambda r: float(r["first_attempt"] is not None) if "first_attempt" in r else R.NOT_APPLICABLE,
    "ungrounded_share": lambda r: float(not r["grounded"]) if r.get("grounded") is not None else R.NOT_APPLICABLE,
    "commit_share": lambda r: float(r["committed"]) if r.get("committed") is not None else R.NOT_APPLICABLE,
    "grounded_only_accuracy": _f("grounded_correct"),
    "accuracy": lambda r: (
        (None if r.get("correct") is None else float(r["correct"])) if "first_attempt" in r else R.NOT_APPLICABLE
    ),
}


def _length_bins(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """question_id -> length bin (quintiles of the distinct questions' lengths)."""
    lengths = {r["question_id"]: r["evidence_length"] for r in rows}
    if not lengths:
        return {}
    values = np.array(sorted(lengths.values()), float)
    edges = np.quantile(values, [0.2, 0.4, 0.6, 0.8])
    return {q: LENGTH_BINS[int(np.searchsorted(edges, v, side="left"))] for q, v in lengths.items()}


def _paired(rows, schedule: str) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(row of ``schedule``, row of ``full``) for every question graded under both."""
    full = {(r["scene_id"], r["question_id"], r["repeat"]): r for r in rows if r["schedule"] == "full"}
    out = []
    for r in rows:
        if r["schedule"] != schedule or r.get("correct") is None:
            continue
        base = full.get((r["scene_id"], r["question_id"], r["repeat"]))
        if base is not None and base.get("correct") is not None:
            out.append((r, base))
    return out


def _ratio(pairs, n_boot: int, seed: int) -> dict[str, Any]:
    """Correct under the schedule over correct under ``full`` on the same questions, with
    the interval of the ratio of the two scene-resampled means (same draws for both)."""
    if not pairs:
        return {"retained_accuracy": None, "ci95": None, "n": 0}
    frag = [float(r["correct"]) for r, _ in pairs]
    base = [float(b["correct"]) for _, b in pairs]
    value = sum(frag) / sum(base) if sum(base) else None
    ci = None
    scenes = [r[CLUSTER] for r, _ in pairs]
    if value is not None and len(set(scenes)) >= 2:
        dist = R.bootstrap_means({"frag": frag, "base": base}, scenes, n_boot=n_boot, seed=seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(dist["base"] > 0, dist["frag"] / np.where(dist["base"] > 0, dist["base"], 1), np.nan)
        ci = R.percentile_interval(ratio)
    return {"retained_accuracy": value, "ci95": ci, "n": len(pairs)}


#: Table 1's retained columns and the schedules each averages (the paper's column groups
#: "question in text", "question in layers", and alignment + order)
RETAINED_COLUMNS: dict[str, tuple[str, ...]] = {
    "text": ("concat-q", "sharded-q", "recap-q", "snowball-q"),
    "visual": ("concat-v", "sharded-v", "recap-v", "snowball-v"),
    "layered": ("aligned", "misaligned", "ev-first", "ev-last", "shuffled"),
}


def retained(full_accuracy: float | None, accuracies: Sequence[float | None]) -> float | None:
    """Retained accuracy of one of Table 1's columns: the mean accuracy of its schedules
    over the accuracy under ``full`` (a fraction; the paper prints it as a percentage).
    None when ``full`` has no right answer or no schedule has an accuracy.

    >>> round(100 * retained(0.559, [0.549, 0.533, 0.711, 0.630]))  # Table 1, Qwen2.5-VL-32B, Text
    108
    """
    values = [float(a) for a in accuracies if a is not None]
    if full_accuracy is None or not full_accuracy or not values:
        return None
    return (sum(values) / len(values)) / float(full_accuracy)


def _retained(rows: Sequence[Mapping[str, Any]], schedules: Iterable[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Per schedule: correct under it over correct under ``full`` on the same questions.
    ``by_column``: Table 1's Text / Visual / Layered retained accuracy as the paper
    defines it (:func:`retained`: each schedule's accuracy, their mean over ``full``'s),
    with the interval of that ratio over the same scene resamples for every schedule."""
    if not any(r["schedule"] == "full" for r in rows):
        return {}
    out: dict[str, Any] = {}
    for schedule in schedules:
        if schedule == "full":
            continue
        pairs = _paired(rows, schedule)
        if pairs:
            out[schedule] = _ratio(pairs, n_boot, seed)
    present = {r["schedule"] for r in rows if r.get("correct") is not None}
    by_column: dict[str, Any] = {}
    graded = [r for r in rows if r.get("correct") is not None]
    needed = {"full"} | {s for cols in RETAINED_COLUMNS.values() for s in cols}
    columns = {s: [float(r["correct"]) if r["schedule"] == s else None for r in graded] for s in needed if s in present}
    dist = None
    scenes = [r[CLUSTER] for r in graded]
    if "full" in columns and len(set(scenes)) >= 2:
        dist = R.bootstrap_means(columns, scenes, n_boot=n_boot, seed=seed)
    acc = {s: R.mean(v) for s, v in columns.items()}
    for column, scheds in RETAINED_COLUMNS.items():
        have = [s for s in scheds if s in acc]
        if not have or "full" not in acc:
            continue
        value = retained(acc["full"], [acc[s] for s in have])
        ci = None
        if value is not None and dist is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.nanmean(np.stack([dist[s] for s in have]), axis=0)
                ratio = np.where(dist["full"] > 0, mean / np.where(dist["full"] > 0, dist["full"], 1), np.nan)
            ci = R.percentile_interval(ratio)
        by_column[column] = {
            "retained_accuracy": value,
            "ci95": ci,
            "schedules": have,
            "complete": len(have) == len(scheds),
            "full_accuracy": acc["full"],
            "accuracies": {s: acc[s] for s in have},
        }
    out["by_column"] = by_column
    return out


def _loss_by(rows, field: str, conditions: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Accuracy of ``full`` and the loss (condition - full, paired per question) per value
    of ``field``, resampled over scenes."""
    out: dict[str, Any] = {}
    for value in sorted({r[field] for r in rows}, key=str):
        subset = [r for r in rows if r[field] == value]
        entry: dict[str, Any] = {"questions": len({r["question_id"] for r in subset})}
        base = [r for r in subset if r["schedule"] == "full"]
        if base:
            entry["full"] = R.cell(base, {"accuracy": _f("correct")}, CLUSTER, n_boot=n_boot, seed=seed)
        for cond in conditions:
            paired = [
                {CLUSTER: r[CLUSTER], "loss": float(r["correct"]) - float(b["correct"])}
                for r, b in _paired(subset, cond)
            ]
            if paired:
                entry[f"delta_{cond}"] = R.cell(paired, ["loss"], CLUSTER, n_boot=n_boot, seed=seed)
        out[str(value)] = entry
    return out


def _extra_loss(rows, conditions: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Table 8: the loss against ``full`` of relational and of single-object questions
    under each condition, and the extra loss (relational - single); its interval from
    the two scene-resampled means drawn with the same scene draws."""
    out: dict[str, Any] = {}
    for cond in conditions:
        pairs = _paired(rows, cond)
        if not pairs:
            continue
        loss = [float(r["correct"]) - float(b["correct"]) for r, b in pairs]
        relational = [v if r["relational"] else None for v, (r, _) in zip(loss, pairs)]
        single = [None if r["relational"] else v for v, (r, _) in zip(loss, pairs)]
        rel, sgl = R.mean(relational), R.mean(single)
        entry = {"relational": rel, "single_object": sgl, "extra_loss": None, "ci95": None, "n": len(pairs)}
        if rel is not None and sgl is not None:
            entry["extra_loss"] = rel - sgl
            scenes = [r[CLUSTER] for r, _ in pairs]
            if len(set(scenes)) >= 2:
                dist = R.bootstrap_means({"rel": relational, "single": single}, scenes, n_boot=n_boot, seed=seed)
                entry["ci95"] = R.percentile_interval(dist["rel"] - dist["single"])
        out[cond] = entry
    return out


def attempt_curve(
    multi: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED
) -> dict[str, Any]:
    """Figure 6: over multi-turn conversations, per successive answer attempt (1st, 2nd,
    ...: the turns whose reply attempts an answer, in order) the reply's length in words
    and its accuracy; ``baseline``: accuracy under ``full`` (the single-turn baseline) on
    the same questions."""
    records = []
    for r in multi:
        k = 0
        for a, ok, words in zip(r.get("turn_attempts") or (), r.get("turn_correct") or (), r.get("turn_words") or ()):
            if not a:
                continue
            k += 1
            records.append(
                {CLUSTER: r[CLUSTER], "attempt": k, "words": float(words), "correct": None if ok is None else float(ok)}
            )
    questions = {(r["scene_id"], r["question_id"]) for r in multi}
    base = [r for r in rows if r["schedule"] == "full" and (r["scene_id"], r["question_id"]) in questions]
    return {
        "by_attempt": R.breakdown(
            records,
            ["attempt"],
            {"words": "words", "accuracy": "correct"},
            CLUSTER,
            n_boot=n_boot,
            seed=seed,
            key=lambda f, v: str(v),
            order={"attempt": sorted({x["attempt"] for x in records})},
        ),
        "baseline": R.cell(base, {"accuracy": _f("correct")}, CLUSTER, n_boot=n_boot, seed=seed) if base else None,
    }


def loss_concentration(
    rows: Sequence[Mapping[str, Any]], conditions: Sequence[str] = ("concat-v", "oracle")
) -> dict[str, Any]:
    """Figure 8 (left): per condition, the questions ranked by their loss against
    ``full`` (full correct minus condition correct, averaged over repeats), the running
    total of that loss as a share of the total, and how few questions hold half and 80%
    of it (None when nothing is lost overall)."""
    out: dict[str, Any] = {}
    for cond in conditions:
        per_q: dict[tuple, list[float]] = {}
        for r, b in _paired(rows, cond):
            per_q.setdefault((r["scene_id"], r["question_id"]), []).append(float(b["correct"]) - float(r["correct"]))
        if not per_q:
            continue
        losses = np.sort(np.array([sum(v) / len(v) for v in per_q.values()]))[::-1]
        total = float(losses.sum())
        entry: dict[str, Any] = {
            "questions": len(losses),
            "total_loss": total,
            "running_share": None,
            "share_of_questions_for_half": None,
            "share_of_questions_for_80": None,
        }
        if total > 0:
            running = np.cumsum(losses) / total
            entry["running_share"] = [round(float(x), 4) for x in running]
            for key, level in (("share_of_questions_for_half", 0.5), ("share_of_questions_for_80", 0.8)):
                entry[key] = float((int(np.argmax(running >= level - 1e-12)) + 1) / len(losses))
        out[cond] = entry
    return out


#: Figure 9's streams: the fragmented schedule and the one that restores it
STREAMS: dict[str, tuple[str, str]] = {"text": ("sharded-q", "recap-q"), "visual": ("sharded-v", "recap-v")}


def restoration(rows: Sequence[Mapping[str, Any]], n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Figure 9: per stream, on the questions graded under ``full``, the fragmented and the
    restored schedule: the cost of fragmenting (fragmented - full), the recovery
    (restored - fragmented) and the overshoot (restored - full), scene-resampled."""
    out: dict[str, Any] = {}
    full = {
        (r["scene_id"], r["question_id"], r["repeat"]): r
        for r in rows
        if r["schedule"] == "full" and r.get("correct") is not None
    }
    for stream, (frag, restored) in STREAMS.items():
        got = {
            s: {
                (r["scene_id"], r["question_id"], r["repeat"]): r
                for r in rows
                if r["schedule"] == s and r.get("correct") is not None
            }
            for s in (frag, restored)
        }
        keys = [k for k in full if k in got[frag] and k in got[restored]]
        if not keys:
            continue
        recs = []
        for k in keys:
            b, f, re_ = float(full[k]["correct"]), float(got[frag][k]["correct"]), float(got[restored][k]["correct"])
            recs.append({CLUSTER: full[k][CLUSTER], "cost": f - b, "recovery": re_ - f, "overshoot": re_ - b})
        out[stream] = {
            "fragmented": frag,
            "restored": restored,
            **R.cell(recs, ["cost", "recovery", "overshoot"], CLUSTER, n_boot=n_boot, seed=seed),
        }
    return out


def report(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Every Layered-VQA number of a set of scored rows (deduplicated by id)."""
    deduped = R.dedupe(expand_repeats(rows), ("scene_id", "question_id", "schedule", "repeat"), same=("output",))
    rows = [dict(r) for r in deduped.rows]
    order = {"schedule": list(SCHEDULES)}
    bins = _length_bins(rows)
    for r in rows:
        r["length_bin"] = bins.get(r["question_id"])
        r["delivery"] = "one turn" if r["single_turn"] else "across turns"
    schedules = [s for s in SCHEDULES if any(r["schedule"] == s for r in rows)]
    graders = sorted({r.get("grader", "rule") for r in rows})
    retained_part = _retained(rows, schedules, n_boot, seed)
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "dataset": R.dataset_identity(rows, ITEM_FIELDS, DATA_FIELDS),
        "n_duplicates": deduped.n_duplicates,
        "n_failed_conversations": sum(1 for r in rows if r.get("failure")),
        # every row not graded (a conversation that stopped early, a row that failed the
        # load-time check, a scoring failure): counted, the first ones named with their reasons
        **R.unscored_summary(rows, ("scene_id", "question_id", "schedule", "repeat")),
        "grader": graders[0] if len(graders) == 1 else graders,
        "synonyms": sorted({r.get("synonyms", "") for r in rows}),
        "interval": {
            "method": "percentile bootstrap",
            "cluster": CLUSTER,
            "n_boot": n_boot,
            "seed": seed,
            "level": R.LEVEL,
        },
        "overall": _headline(rows, retained_part, n_boot, seed),
        "by_schedule": R.breakdown(rows, ["schedule"], ACCURACY, CLUSTER, order=order, n_boot=n_boot, seed=seed),
        "by_type_schedule": R.breakdown(
            rows,
            ["question_type", "schedule"],
            {"accuracy": _f("correct")},
            CLUSTER,
            order={"question_type": list(_types()), **order},
            n_boot=n_boot,
            seed=seed,
        ),
        "retained": retained_part,
    }
    sel = [r for r in rows if "selection" in r]
    if sel:
        out["evidence"] = R.breakdown(
            sel, ["schedule"], SELECTION_METRICS, CLUSTER, order=order, n_boot=n_boot, seed=seed
        )
    multi = [r for r in rows if "first_attempt" in r]
    if multi:
        out["grounding"] = {
            "by_schedule": R.breakdown(multi, ["schedule"], GROUNDING, CLUSTER, order=order, n_boot=n_boot, seed=seed),
            "by_family": R.breakdown(multi, ["family"], GROUNDING, CLUSTER, n_boot=n_boot, seed=seed),
            "overall": R.cell(multi, GROUNDING, CLUSTER, n_boot=n_boot, seed=seed),
            "first_attempt_bins": R.breakdown(
                [r for r in multi if r.get("attempt_bin")],
                ["attempt_bin"],
                {"accuracy": _f("correct"), "commit_share": GROUNDING["commit_share"]},
                CLUSTER,
                order={"attempt_bin": list(POSITION_BINS)},
                n_boot=n_boot,
                seed=seed,
            ),
        }
    if any(r["repeat"] > 0 for r in rows):
        out["reliability"] = reliability(rows, n_boot=n_boot, seed=seed)
    if multi:
        out["attempts"] = attempt_curve(multi, rows, n_boot=n_boot, seed=seed)
    out["loss_concentration"] = loss_concentration(rows)
    out["restoration"] = restoration(rows, n_boot, seed)
    out["by_length"] = R.breakdown(
        rows,
        ["delivery", "length_bin"],
        {"accuracy": _f("correct")},
        CLUSTER,
        order={"delivery": ["one turn", "across turns"], "length_bin": list(LENGTH_BINS)},
        n_boot=n_boot,
        seed=seed,
    )
    out["by_depth"] = _loss_by(rows, "depth", ("concat-v", "oracle"), n_boot, seed)
    out["relational"] = _extra_loss(rows, ("concat-v", "oracle"), n_boot, seed)
    return out


def _headline(
    rows: Sequence[Mapping[str, Any]], retained_part: Mapping[str, Any], n_boot: int, seed: int
) -> dict[str, Any]:
    # the pooled accuracy cell with the paper's headline beside it (read by show, the
    # report and the leaderboard)
    cell = R.cell(rows, ACCURACY, CLUSTER, n_boot=n_boot, seed=seed)
    for column, entry in retained_part.get("by_column", {}).items():
        cell[f"retained_{column}"] = entry["retained_accuracy"]
        cell.setdefault("ci95", {})[f"retained_{column}"] = entry["ci95"]
    return cell


def headline_cell(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """The headline cell of a set of scored rows (every schedule of a run together): Table
    1's retained accuracy Text / Visual / Layered and the pooled final-turn accuracy, with
    their intervals, exactly as :func:`report` computes its ``overall`` cell (the
    leaderboard recomputes a submission's headline with it)."""
    rows = [
        dict(r) for r in R.dedupe(expand_repeats(rows), ("scene_id", "question_id", "schedule", "repeat"), same=()).rows
    ]
    schedules = [s for s in SCHEDULES if any(r["schedule"] == s for r in rows)]
    return _headline(rows, _retained(rows, schedules, n_boot, seed), n_boot, seed)


def schedule_part(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A one-schedule task's part of the group's retained accuracy: its schedule and how
    many answers were correct out of how many were graded (None when the rows mix
    schedules or none was graded)."""
    schedules = {r.get("schedule") for r in rows}
    graded = [r for r in rows if r.get("correct") is not None]
    if len(schedules) != 1 or not graded:
        return None
    return {
        "schedule": schedules.pop(),
        "n_correct": int(sum(bool(r["correct"]) for r in graded)),
        "n_graded": len(graded),
        "retained_accuracy": None,
        "why": "retained accuracy needs the full schedule's accuracy: the layered_vqa group combines the schedules' parts",
    }


def retained_from_parts(parts: Sequence[Any], column: str) -> float | None:
    """Table 1's retained accuracy ``column`` (text, visual, layered) of a group of
    one-schedule tasks, from their parts (:func:`schedule_part`): each schedule's
    accuracy, their mean over ``full``'s (:func:`retained`). None without ``full``, with
    nothing right under it, or with none of the column's schedules. ``lmms-scene show``
    adds scene-resampled intervals."""
    parts = [p for p in parts if isinstance(p, Mapping) and p.get("schedule") and p.get("n_graded")]
    full = next((p for p in parts if p["schedule"] == "full"), None)
    if full is None:
        return None
    accs = [p["n_correct"] / p["n_graded"] for p in parts if p["schedule"] in RETAINED_COLUMNS[column]]
    return retained(full["n_correct"] / full["n_graded"], accs) if accs else None


def expand_repeats(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows with the extra samples of a ``repeats`` run (``repeat_rows``) as rows of their own."""
    out: list[Mapping[str, Any]] = []
    for row in rows:
        extra = row.get("repeat_rows") if isinstance(row, Mapping) else None
        if extra:
            out.append({k: v for k, v in row.items() if k != "repeat_rows"})
            out.extend(extra)
        else:
            out.append(row)
    return out


def reliability(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Repeated sampling (``--repeats N``), after Laban et al. 2025 ("LLMs Get Lost in
    Multi-Turn Conversation", section 3.3): per schedule and question, over its N
    samples, **aptitude** A90 = the 90th percentile of the scores and **unreliability**
    U90_10 = the 90th minus the 10th percentile (numpy's linear percentiles), with the
    mean score (``average``) beside them; each averaged over questions, scene-resampled."""
    per_question: dict[tuple, list[float]] = {}
    scene_of: dict[tuple, str] = {}
    for r in rows:
        if r.get("correct") is None:
            continue
        key = (r["schedule"], r["question_id"])
        per_question.setdefault(key, []).append(float(r["correct"]))
        scene_of[key] = r["scene_id"]
    summary = []
    for (schedule, qid), values in per_question.items():
        v = np.asarray(values)
        p90, p10 = float(np.percentile(v, 90)), float(np.percentile(v, 10))
        summary.append(
            {
                "schedule": schedule,
                "question_id": qid,
                CLUSTER: scene_of[(schedule, qid)],
                "repeats": len(values),
                "aptitude": p90,
                "unreliability": p90 - p10,
                "average": float(v.mean()),
                "p10": p10,
            }
        )

    return R.breakdown(
        summary,
        ["schedule"],
        ["aptitude", "unreliability", "average", "p10", "repeats"],
        CLUSTER,
        order={"schedule": list(SCHEDULES)},
        n_boot=n_boot,
        seed=seed,
    )


def _types():
    return QUESTION_TYPES
