"""Object-naming metrics for COOCO (Merlo et al. 2025, Section 4.3).

One COOCO answer is scored once into a flat *row* (:func:`score_rows`) that carries
its stable ids (image id, condition, noise area, noise level) and every per-item
score. Aggregations (:func:`mean_of`, :func:`breakdown`) read rows, deduplicate them by
id and never rely on their order, because lmms-eval gathers rows from several
processes out of doc order.

Metrics (all on CLIP ViT-B/32 unless configured otherwise, see
:mod:`lmms_scene.metrics.clip`):

* ``refclipscore``: RefCLIP-S of the long output ``"A photo depicts a/an {output}"``
  against the target crop of the padded, noise-free image and the long gold label.
* ``accuracy``: CLIP text cosine(long output, long gold) >= 0.9.
* ``levenshtein_accuracy``: rapidfuzz ``fuzz.ratio(output, gold) / 100 >= 0.55``.
* ``output_scene_similarity``: CLIP text cosine(long output, "A photo depicts a/an {scene}").
* ``context_captured`` (incongruent items only): the output is closer in CLIP text
  space to the original, scene-typical target than to the gold replacement.

Empty outputs are kept: they score 0 on ``refclipscore``, ``accuracy`` and
``levenshtein_accuracy`` (counted wrong), are never "captured", have no similarity
(``clip_score``, ``reference_similarity``, ``text_similarity`` and
``output_scene_similarity`` are ``None``: not computed, left out of those means) and are
counted in ``empty_output_rate``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmms_scene.metrics import clip as clip_metrics

NORMALISER_VERSION = "cooco-normalise-2"
#: Merlo et al. (2025), Section 4.3: accuracy is CLIP text cosine >= 0.9.
ACCURACY_THRESHOLD = 0.9
#: Authors' code: normalised edit similarity >= 0.55 counts as a correct name.
LEVENSHTEIN_THRESHOLD = 0.55
#: An answer longer than this many words ignored "Answer with the object's name only".
VERBOSE_WORDS = 10

CONDITIONS: tuple[str, ...] = ("original", "same_target", "high", "medium", "low")
INCONGRUENT: tuple[str, ...] = ("high", "medium", "low")
NO_NOISE_AREA = "none"

#: Per-row fields averaged in every breakdown cell, in report order.
CELL_METRICS: tuple[str, ...] = (
    "refclipscore",
    "clip_score",
    "reference_similarity",
    "accuracy",
    "levenshtein_accuracy",
    "text_similarity",
    "output_scene_similarity",
    "context_captured",
    "empty",
)

# End-of-turn markers that leak into decoded outputs of the model families COOCO uses:
# the answer ends at the first one.
_END_OF_TURN = re.compile(
    r"<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|end\|>|<end_of_turn>|</s>|<\|end_of_text\|>|<eos>"
)
# Markers that open the model's turn (an echoed prompt tail): dropped, the answer follows.
_START_OF_TURN = re.compile(r"<\|assistant\|>|\[/INST\]")
_ARTICLE = re.compile(r"^(?:a|an)\s+")


def normalise_label(label: str) -> str:
    """A dataset label as a name: underscores to spaces, lower case, single spaces."""
    return " ".join(str(label).replace("_", " ").lower().split())


def normalise_output(text: str | None) -> str:
    """A model answer as a bare name (authors' normalisation, made explicit).

    Cuts the text at the first end-of-turn marker (whatever follows it is not part of
    the answer), drops every full stop, lower-cases, removes a leading "a "/"an " and
    collapses white space. Unicode is NFKC-normalised and otherwise kept: a
    non-English answer is scored as it is.

    >>> normalise_output("  A Laptop.<|im_end|>")
    'laptop'
    """
    if text is None:
        return ""
    text = unicodedata.normalize("NFKC", str(text))
    marker = _END_OF_TURN.search(text)
    if marker is not None:
        text = text[: marker.start()]
    text = _START_OF_TURN.sub(" ", text)
    # Merlo et al. (2025), Section 4.3: full stops are dropped (all of them).
    text = text.replace(".", "")
    text = " ".join(text.split()).lower()
    text = _ARTICLE.sub("", text)
    return text.strip()


def article(name: str) -> str:
    return "an" if name[:1] in "aeiou" and name else "a"


def long_form(name: str) -> str:
    """``"A photo depicts a/an {name}"``, the caption form CLIP scores (Hessel et al. 2021)."""
    name = name.strip()
    return f"A photo depicts {article(name)} {name}".rstrip()


def levenshtein_similarity(a: str, b: str) -> float:
    """Normalised Indel similarity in [0, 1] (rapidfuzz ``fuzz.ratio`` / 100)."""
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) / 100.0


def row_key(row: Mapping[str, Any]) -> tuple:
    """The stable id of a scored row."""
    return (row["image_id"], row["condition"], row["noise_area"], float(row["noise_level"]))


def score_rows(items: Sequence[Mapping[str, Any]], model: str | None = None) -> list[dict[str, Any]]:
    """Score a batch of COOCO answers.

    Each item needs ``image_id, condition, noise_area, noise_level, scene, target, gold,
    output`` (the raw model answer) and ``crop`` (PIL image of the target box on the
    padded image before noise), optionally ``crop_key`` (a hashable naming the crop's
    pixels, so a crop scored under several noise settings is encoded once). Returns one
    JSON-ready row per item with the ids, the normalised prediction and every score.
    """
    model_name = clip_metrics.resolve_model(model)
    use_clip = clip_metrics.clip_enabled(model_name)
    rows: list[dict[str, Any]] = []
    for item in items:
        condition = str(item["condition"])
        if condition not in CONDITIONS:
            raise ValueError(f"{item['image_id']}: unknown condition {condition!r}; expected one of {CONDITIONS}")
        raw = "" if item["output"] is None else str(item["output"])
        prediction = normalise_output(raw)
        rows.append(
            {
                "image_id": str(item["image_id"]),
                "condition": condition,
                "noise_area": str(item["noise_area"]),
                "noise_level": float(item["noise_level"]),
                "scene": normalise_label(item["scene"]),
                "target": normalise_label(item["target"]),
                "gold": normalise_label(item["gold"]),
                "output": raw,
                "prediction": prediction,
                "empty": prediction == "",
                "output_words": len(prediction.split()),
                "non_ascii": any(ord(ch) > 127 for ch in prediction),
                "clip_model": model_name if use_clip else None,
            }
        )
    scored = [(i, r) for i, r in enumerate(rows) if not r["empty"]]
    for row in rows:
        if row["empty"]:
            row.update(
                # counted wrong (per the spec) ...
                refclipscore=0.0, accuracy=0.0, levenshtein_accuracy=0.0, levenshtein_similarity=0.0,
                # ... but no similarity is computed for an empty answer
                clip_score=None, reference_similarity=None, text_similarity=None,
                output_scene_similarity=None, output_target_similarity=None,
                context_captured=False if row["condition"] in INCONGRUENT else None,
            )
    if not use_clip:
        # CLIP switched off: its metrics are recorded as not computed, never as zeros.
        for row in rows:
            lev = levenshtein_similarity(row["prediction"], row["gold"]) if not row["empty"] else 0.0
            row.update({name: None for name in CLIP_FIELDS})
            row.update(levenshtein_similarity=lev, levenshtein_accuracy=float(lev >= LEVENSHTEIN_THRESHOLD))
        return rows
    if not scored:
        return rows
    preds = [long_form(r["prediction"]) for _, r in scored]
    golds = [long_form(r["gold"]) for _, r in scored]
    keys = [items[i].get("crop_key") for i, _ in scored]
    parts = clip_metrics.ref_clip_components(
        [items[i]["crop"] for i, _ in scored], preds, [[g] for g in golds], model=model_name,
        image_keys=keys if all(k is not None for k in keys) else None,
    )
    # One text_similarity call for the three comparisons keeps the batch together.
    n = len(scored)
    sims = clip_metrics.text_similarity(
        preds * 3,
        golds + [long_form(r["scene"]) for _, r in scored] + [long_form(r["target"]) for _, r in scored],
        model=model_name,
    )
    for k, (_, row) in enumerate(scored):
        to_gold, to_scene, to_target = sims[k], sims[n + k], sims[2 * n + k]
        lev = levenshtein_similarity(row["prediction"], row["gold"])
        row.update(
            clip_score=parts.clip_score[k],
            reference_similarity=parts.reference_similarity[k],
            refclipscore=parts.ref_clip_score[k],
            text_similarity=to_gold,
            # Merlo et al. (2025), Section 4.3: correct iff cos(long output, long gold) >= 0.9.
            accuracy=float(to_gold >= ACCURACY_THRESHOLD),
            levenshtein_similarity=lev,
            levenshtein_accuracy=float(lev >= LEVENSHTEIN_THRESHOLD),
            output_scene_similarity=to_scene,
            output_target_similarity=to_target,
            # Not in the paper: did the scene-typical original win over the replacement?
            context_captured=(to_target > to_gold) if row["condition"] in INCONGRUENT else None,
        )
    return rows


#: row fields computed with CLIP (``None`` when CLIP metrics are switched off)
CLIP_FIELDS = (
    "clip_score", "reference_similarity", "refclipscore", "text_similarity", "accuracy",
    "output_scene_similarity", "output_target_similarity", "context_captured",
)  # fmt: skip


# -- aggregation --------------------------------------------------------------------


class DuplicateRowError(ValueError):
    """Two rows share an id (:func:`row_key`) but disagree on the model output."""


def dedupe_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int]:
    """Rows deduplicated by :func:`row_key` (first wins), sorted by key, and how many
    duplicates were dropped. Raises :class:`DuplicateRowError` naming the key when two
    rows with one key carry different outputs (a duplicate must be a re-gathered copy,
    not a second answer)."""
    seen: dict[tuple, Mapping[str, Any]] = {}
    dropped = 0
    for row in rows:
        key = row_key(row)
        first = seen.get(key)
        if first is None:
            seen[key] = row
            continue
        dropped += 1
        if "output" in first or "output" in row:
            if first.get("output") != row.get("output"):
                raise DuplicateRowError(
                    f"rows with the same id {key} have different outputs: "
                    f"{first.get('output')!r} vs {row.get('output')!r}"
                )
    return [seen[k] for k in sorted(seen, key=lambda k: tuple(map(str, k)))], dropped


def unique_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows deduplicated by :func:`row_key` (see :func:`dedupe_rows`), sorted by key."""
    return dedupe_rows(rows)[0]


def _mean(values: Iterable[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    vals = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def mean_of(rows: Iterable[Mapping[str, Any]], field: str) -> float | None:
    """Mean of ``field`` over unique rows, skipping ``None`` (no value for that row)."""
    return _mean(r.get(field) for r in unique_rows(rows))


def level_key(level: float) -> str:
    """Noise level as a JSON key: ``0``, ``0.5``, ``1``."""
    return f"{float(level):g}"


def _cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    cell: dict[str, Any] = {"n": len(rows)}
    for field in CELL_METRICS:
        value = _mean(r.get(field) for r in rows)
        name = {"context_captured": "context_capture_rate", "empty": "empty_output_rate"}.get(field, field)
        if value is not None:
            cell[name] = value
    return cell


def output_statistics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many answers were empty, verbose or non-ASCII (all of them still scored)."""
    n = len(rows)
    counts = {
        "n_empty": sum(bool(r["empty"]) for r in rows),
        "n_verbose": sum(r.get("output_words", 0) > VERBOSE_WORDS for r in rows),
        "n_non_ascii": sum(bool(r.get("non_ascii")) for r in rows),
    }
    stats: dict[str, Any] = {"n": n, **counts}
    for key, count in counts.items():
        stats[key[2:] + "_output_rate"] = count / n if n else None
    stats["mean_output_words"] = _mean(r.get("output_words") for r in rows)
    stats["verbose_threshold_words"] = VERBOSE_WORDS
    return stats


def breakdown(rows: Iterable[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full COOCO report: overall means, means per condition x noise area x noise
    level (Figures 3-4), context-capture rates, output statistics and provenance."""
    unique, dropped = dedupe_rows(rows)
    grid: dict[str, dict[str, dict[str, list]]] = {}
    for row in unique:
        grid.setdefault(row["condition"], {}).setdefault(row["noise_area"], {}).setdefault(
            level_key(row["noise_level"]), []
        ).append(row)
    conditions = [c for c in CONDITIONS if c in grid] + sorted(set(grid) - set(CONDITIONS))
    by_cell = {
        c: {a: {lv: _cell(grid[c][a][lv]) for lv in sorted(grid[c][a], key=float)} for a in sorted(grid[c])}
        for c in conditions
    }
    incongruent = [r for r in unique if r["condition"] in INCONGRUENT]
    # An item can be both accurate (cos >= 0.9 to gold) and captured (closer to the
    # original target than to the gold), e.g. in ``high``; this rate counts capture
    # only among the incongruent answers that are not accurate.
    wrong = [r for r in incongruent if r.get("accuracy") is not None and not r["accuracy"]]
    return {
        "scorer": dict(provenance or {}),
        "clip_models": sorted({str(m) for r in unique if (m := r.get("clip_model"))}),
        "n_rows": len(unique),
        "n_duplicate_rows_dropped": dropped,
        "overall": _cell(unique),
        "by_condition": {c: _cell([r for r in unique if r["condition"] == c]) for c in conditions},
        "by_condition_noise": by_cell,
        "context_capture_rate": _mean(r["context_captured"] for r in incongruent),
        "context_capture_rate_among_wrong": _mean(r["context_captured"] for r in wrong),
        "output_statistics": output_statistics(unique),
    }


def provenance(model: str | None = None) -> dict[str, Any]:
    """What computed the COOCO scores (checkpoint, thresholds, normaliser)."""
    from lmms_scene.provenance import scorer

    name = clip_metrics.resolve_model(model)
    clip = {"clip_model": name} if clip_metrics.clip_enabled(name) else {
        "clip_model": None,
        "clip_metrics": f"not computed ({clip_metrics.CLIP_MODEL_ENV}={clip_metrics.CLIP_DISABLED})",
    }
    return scorer(
        "cooco_naming",
        **clip,
        clip_s_weight=clip_metrics.CLIP_S_WEIGHT,
        accuracy_threshold=ACCURACY_THRESHOLD,
        levenshtein_threshold=LEVENSHTEIN_THRESHOLD,
        levenshtein="rapidfuzz.fuzz.ratio/100",
        normaliser=NORMALISER_VERSION,
        long_form="A photo depicts a/an {name}",
        image="target crop of the grey-padded square image before noise",
    )


# -- lmms-eval glue: one scored row, several metric keys --------------------------------

#: Headline metric key -> the row field it averages.
HEADLINE: dict[str, str] = {
    "refclipscore": "refclipscore",
    "accuracy": "accuracy",
    "levenshtein_accuracy": "levenshtein_accuracy",
    "output_scene_similarity": "output_scene_similarity",
    "context_capture_rate": "context_captured",
    "empty_output_rate": "empty",
}
BREAKDOWN_KEY = "cooco_breakdown"
#: ``scorer.clip_model`` when the rows were scored with more than one CLIP checkpoint.
MIXED_CLIP_MODELS = "mixed"


def metric_entries(row: Mapping[str, Any]) -> dict[str, Any]:
    """What ``process_results`` returns for one scored row: the full row under
    :data:`BREAKDOWN_KEY` and, per headline metric, the row's ids plus ``score`` (absent
    when the row has no value for that metric, e.g. capture on congruent items).
    lmms-eval reads ``score`` for its CLT standard errors."""
    ids = {k: row[k] for k in ("image_id", "condition", "noise_area", "noise_level")}
    out: dict[str, Any] = {BREAKDOWN_KEY: dict(row)}
    for key, field in HEADLINE.items():
        value = row.get(field)
        out[key] = {**ids, "score": float(value)} if value is not None else dict(ids)
    return out


def mean_score(entries: Iterable[Mapping[str, Any]]) -> float | None:
    """Mean ``score`` over entries deduplicated by id (an aggregation for lmms-eval)."""
    return _mean(e.get("score") for e in unique_rows(entries))


def report(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`breakdown` with the provenance of the checkpoint the rows were scored with.

    lmms-eval 0.7.3 writes this dict into the results JSON as it is; its printed table
    shows it in one wide cell (pytablewriter formats dicts itself, so no summary string
    can replace it there without changing what the JSON holds)."""
    rows = list(rows)
    models = sorted({str(r.get("clip_model")) for r in rows if r.get("clip_model")})
    if rows and not models:  # every row was scored with CLIP switched off
        models = [clip_metrics.CLIP_DISABLED]
    if len(models) > 1:
        # Rows scored with several checkpoints: name none of them (least of all the
        # env/default one); ``clip_models`` in the breakdown lists them.
        record = provenance(models[0])
        record.pop("clip_metrics", None)
        record.update(clip_model=MIXED_CLIP_MODELS, clip_models=models)
        return breakdown(rows, record)
    return breakdown(rows, provenance(models[0] if models else None))


# -- Figures 3-4 from results files -------------------------------------------------------

#: Column order of Figure 4: no noise, then each area at 0.5 and 1.0.
FIGURE4_SETTINGS: tuple[tuple[str, str], ...] = (("none", "0"),) + tuple(
    (area, level) for area in ("context", "target", "all") for level in ("0.5", "1")
)


def reports_in(path: str) -> list[dict[str, Any]]:
    """The COOCO breakdowns in a results JSON (every task that has one), or one
    breakdown recomputed from a samples JSONL (its rows carry their ids)."""
    import json
    from pathlib import Path

    text = Path(path).read_text(encoding="utf-8")
    if path.endswith(".jsonl"):
        rows = [json.loads(line)[BREAKDOWN_KEY] for line in text.splitlines() if line.strip()]
        return [report(rows)]
    results = json.loads(text)["results"]
    return [v[f"{BREAKDOWN_KEY},none"] for v in results.values() if f"{BREAKDOWN_KEY},none" in v]


def merge_reports(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``by_condition_noise`` grid from several breakdowns (e.g. ``cooco`` at level 0
    and ``cooco_noise``); later reports fill cells the earlier ones lack."""
    grid: dict[str, Any] = {}
    for rep in reports:
        for condition, areas in rep["by_condition_noise"].items():
            for area, levels in areas.items():
                for level, cell in levels.items():
                    grid.setdefault(condition, {}).setdefault(area, {}).setdefault(level, cell)
    return grid


def _fmt(value: Any) -> str:
    return "" if value is None else f"{value:.3f}"


def figure3_table(models: Mapping[str, Mapping[str, Any]], metric: str = "refclipscore") -> str:
    """Figure 3: ``metric`` per model (columns) and condition (rows) at noise level 0.
    ``models`` maps a model name to its merged grid (:func:`merge_reports`)."""
    names = list(models)
    lines = ["| condition | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for condition in CONDITIONS:
        cells = [models[m].get(condition, {}).get("none", {}).get("0", {}).get(metric) for m in names]
        lines.append(f"| {condition} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def figure4_table(grid: Mapping[str, Any], metric: str = "refclipscore") -> str:
    """Figure 4: ``metric`` by condition (rows) x noise area and level (columns)."""
    header = [f"{a} {lv}" if a != "none" else "no noise" for a, lv in FIGURE4_SETTINGS]
    lines = ["| condition | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    for condition in CONDITIONS:
        cells = [grid.get(condition, {}).get(a, {}).get(lv, {}).get(metric) for a, lv in FIGURE4_SETTINGS]
        lines.append(f"| {condition} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print Figures 3-4 as Markdown tables from lmms-eval results or samples files.

    ``python -m lmms_scene.metrics.naming RESULTS.json [MORE.json ...] [--name MODEL ...]``;
    Figure 3 gets one column per file (model); Figure 4 averages nothing: it shows the
    first file's grid, or every file's in turn.
    """
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m lmms_scene.metrics.naming", description=main.__doc__)
    parser.add_argument("files", nargs="+", help="*_results.json (cooco and/or cooco_noise) or *_samples_*.jsonl")
    parser.add_argument("--name", action="append", default=[], help="model name per file (default: file name)")
    args = parser.parse_args(argv)
    models: dict[str, dict[str, Any]] = {}
    for k, path in enumerate(args.files):
        name = args.name[k] if k < len(args.name) else Path(path).stem
        reports = reports_in(path)
        if not reports:
            parser.error(f"{path}: no {BREAKDOWN_KEY} in this file")
        models[name] = merge_reports(reports)
    print("Figure 3: RefCLIPScore at noise level 0\n")
    print(figure3_table(models))
    for name, grid in models.items():
        for metric, title in (("refclipscore", "4a: RefCLIPScore"), ("accuracy", "4b: accuracy")):
            print(f"\nFigure {title} by relatedness x noise area x level ({name})\n")
            print(figure4_table(grid, metric))
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.exit(main())
