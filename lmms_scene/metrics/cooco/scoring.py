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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lmms_scene import benchmarks, cache
from lmms_scene.data import recheck
from lmms_scene.data.cooco import views
from lmms_scene.data.cooco.schema import CONDITIONS, NO_NOISE_AREA
from lmms_scene.metrics import clip as clip_metrics
from lmms_scene.metrics import rows as rows_lib

# the two readings (metrics/cooco/readings.py); their names stay reachable here
from lmms_scene.metrics.cooco.readings import AUTHORS as AUTHORS
from lmms_scene.metrics.cooco.readings import AUTHORS_JPEG_QUALITY as AUTHORS_JPEG_QUALITY
from lmms_scene.metrics.cooco.readings import AUTHORS_MAX_CLIP_TOKENS as AUTHORS_MAX_CLIP_TOKENS
from lmms_scene.metrics.cooco.readings import AUTHORS_NORMALISER as AUTHORS_NORMALISER
from lmms_scene.metrics.cooco.readings import CLEANED as CLEANED
from lmms_scene.metrics.cooco.readings import NORMALISER_VERSION as NORMALISER_VERSION
from lmms_scene.metrics.cooco.readings import READINGS as READINGS
from lmms_scene.metrics.cooco.readings import _texts
from lmms_scene.metrics.cooco.readings import article as article
from lmms_scene.metrics.cooco.readings import authors_hard_gold as authors_hard_gold
from lmms_scene.metrics.cooco.readings import authors_hard_text as authors_hard_text
from lmms_scene.metrics.cooco.readings import authors_long_form as authors_long_form
from lmms_scene.metrics.cooco.readings import authors_output as authors_output
from lmms_scene.metrics.cooco.readings import clip_token_counts as clip_token_counts
from lmms_scene.metrics.cooco.readings import gold_name as gold_name
from lmms_scene.metrics.cooco.readings import jpeg_round_trip as jpeg_round_trip
from lmms_scene.metrics.cooco.readings import levenshtein_similarity as levenshtein_similarity
from lmms_scene.metrics.cooco.readings import long_form as long_form
from lmms_scene.metrics.cooco.readings import normalise_label as normalise_label
from lmms_scene.metrics.cooco.readings import normalise_output as normalise_output
from lmms_scene.metrics.cooco.readings import reading_of as reading_of

# the one sanitiser of model outputs, shared by every benchmark (``sanitise_output`` is
# re-exported: COOCO had it first)
from lmms_scene.metrics.outputs import clean_output, read_output, sanitise_output  # noqa: F401
from lmms_scene.metrics.outputs import shown as shown_output
from lmms_scene.provenance import scorer

#: ``scorer.reading`` when the rows were scored in both readings
MIXED_READINGS = "mixed"
#: Merlo et al. (2025), Section 4.3: accuracy is CLIP text cosine >= 0.9.
ACCURACY_THRESHOLD = 0.9
#: Authors' code: normalised edit similarity >= 0.55 counts as a correct name.
LEVENSHTEIN_THRESHOLD = 0.55
#: An answer longer than this many words ignored "Answer with the object's name only".
VERBOSE_WORDS = 10

# The conditions are the schema's (lmms_scene.data.cooco.schema, the one definition):
# NAMING_CONDITIONS (original, same_target, high, medium, low) are the naming items and
# Figure 3's rows; CONDITIONS adds ``clean`` (target removed), scored only on request
# (``LMMS_SCENE_COOCO_CLEAN=include``), against the removed target, and reported in its
# own cells: never in the headline means.
INCONGRUENT: tuple[str, ...] = ("high", "medium", "low")
CLEAN = "clean"


#
# ``cleaned`` (the default) is ours: the normalisation above, parentheticals stripped
# from the gold for every naming metric, empty answers kept and scored 0, texts over 77
# CLIP tokens cut. ``authors`` reproduces the inputs of the authors' evaluation
# (filippo-merlo/multimodels_REG_eval: scripts/evaluate.py for the CLIP scores,
# data_analysis/*.py for the Levenshtein accuracy and its row selection); chosen with
# ``LMMS_SCENE_COOCO_READING=authors`` (lmms_scene.settings), recorded in every row.


def score_rows(items: Sequence[Mapping[str, Any]], model: str | None = None) -> list[dict[str, Any]]:
    """Score a batch of COOCO answers.

    Each item needs ``image_id, condition, noise_area, noise_level, scene, target, gold,
    output`` (the raw model answer) and ``crop`` (PIL image of the target box on the
    padded image before noise), optionally ``crop_key`` (a hashable naming the crop's
    pixels, so a crop scored under several noise settings is encoded once), ``reading``
    (:data:`READINGS`; default ``cleaned``) and, for the authors' reading, ``gold_spelling``
    / ``target_spelling`` (the labels as their metadata spells them). Returns one
    JSON-ready row per item with the ids, the normalised prediction and every score.

    In the ``cleaned`` reading the gold is compared without its parenthetical
    (:func:`gold_name`) by every naming metric, CLIP included: ``bat`` is an exact answer
    for ``bat (sports)``. In the ``authors`` reading a row their code skips (an empty
    answer, an answer over 77 CLIP tokens) is kept with ``dropped`` saying why and no
    metric; :func:`breakdown` leaves it out and counts it.
    """
    model_name = clip_metrics.resolve_model(model)
    use_clip = clip_metrics.clip_enabled(model_name)
    rows: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for item in items:
        condition = str(item["condition"])
        if condition not in CONDITIONS:
            raise ValueError(f"{item['image_id']}: unknown condition {condition!r}; expected one of {CONDITIONS}")
        reading = reading_of(item.get("reading"))
        cleaned = clean_output("" if item["output"] is None else str(item["output"]))
        raw, sanitised = cleaned.text or "", cleaned.sanitised
        text = _texts(item, raw, reading)
        texts.append(text)
        prediction = text["prediction"]
        row = {
            "image_id": str(item["image_id"]),
            "condition": condition,
            "noise_area": str(item["noise_area"]),
            "noise_level": float(item["noise_level"]),
            "scene": normalise_label(item["scene"]),
            "target": normalise_label(item["target"]),
            "gold": normalise_label(item["gold"]),
            "gold_name": text["gold_name"],
            "reading": reading,
            "output": raw,
            "prediction": prediction,
            "empty": text["empty"],
            "output_words": len(prediction.split()),
            "non_ascii": any(ord(ch) > 127 for ch in prediction),
            "output_sanitised": sanitised,
            "output_changes": list(cleaned.changes),
            "scored": True,
            "clip_model": model_name if use_clip else None,
            **_selection(item),
        }
        if reading == AUTHORS:
            row.update(dropped=None, hard_chars=text["hard_chars"], gold_chars=text["gold_chars"])
        rows.append(row)
    if use_clip:
        # the authors' CLIP raises on a text over 77 tokens and their loop skips the row
        over = [i for i, (r, t) in enumerate(zip(rows, texts)) if r["reading"] == AUTHORS and not r["empty"]]
        counts = clip_token_counts([texts[i]["long"] for i in over], model_name) if over else []
        for i, count in zip(over, counts):
            if count > AUTHORS_MAX_CLIP_TOKENS:
                rows[i]["dropped"] = "over_77_clip_tokens"
    for row in rows:
        if row["reading"] == AUTHORS and row["empty"]:
            row["dropped"] = "empty"  # their code fails on output[0] and skips the row
        if row.get("dropped"):
            row.update({name: None for name in (*CLIP_FIELDS, "levenshtein_accuracy", "levenshtein_similarity")})
        elif row["empty"]:
            row.update(
                # counted wrong (per the spec) ...
                refclipscore=0.0,
                accuracy=0.0,
                levenshtein_accuracy=0.0,
                levenshtein_similarity=0.0,
                # ... but no similarity is computed for an empty answer
                clip_score=None,
                reference_similarity=None,
                text_similarity=None,
                output_scene_similarity=None,
                output_target_similarity=None,
                context_captured=False if row["condition"] in INCONGRUENT else None,
            )
    live = [k for k, r in enumerate(rows) if not r["empty"] and not r.get("dropped")]
    for k in live:
        lev = levenshtein_similarity(*texts[k]["lev"])
        rows[k].update(levenshtein_similarity=lev, levenshtein_accuracy=float(lev >= LEVENSHTEIN_THRESHOLD))
    if not use_clip:
        # CLIP switched off: its metrics are recorded as not computed, never as zeros.
        for row in rows:
            row.update({name: None for name in CLIP_FIELDS})
        return rows
    if not live:
        return rows
    preds = [texts[k]["long"] for k in live]
    golds = [texts[k]["gold_long"] for k in live]
    crops, keys = [], []
    for k in live:
        item = items[k]
        authors = rows[k]["reading"] == AUTHORS
        # the authors save the crop as a JPEG and read it back before CLIP scores it
        crops.append(jpeg_round_trip(item["crop"]) if authors else item["crop"])
        key = item.get("crop_key")
        keys.append(None if key is None else (key, "jpeg75") if authors else key)
    parts = clip_metrics.ref_clip_components(
        crops,
        preds,
        [[g] for g in golds],
        model=model_name,
        image_keys=keys if all(k is not None for k in keys) else None,
    )
    # One text_similarity call for the three comparisons keeps the batch together.
    n = len(live)
    sims = clip_metrics.text_similarity(
        preds * 3,
        golds + [texts[k]["scene_long"] for k in live] + [texts[k]["target_long"] for k in live],
        model=model_name,
    )
    for j, k in enumerate(live):
        row = rows[k]
        to_gold, to_scene, to_target = sims[j], sims[n + j], sims[2 * n + j]
        row.update(
            clip_score=parts.clip_score[j],
            reference_similarity=parts.reference_similarity[j],
            refclipscore=parts.ref_clip_score[j],
            text_similarity=to_gold,
            # Merlo et al. (2025), Section 4.3: correct iff cos(long output, long gold) >= 0.9.
            accuracy=float(to_gold >= ACCURACY_THRESHOLD),
            output_scene_similarity=to_scene,
            output_target_similarity=to_target,
            # Not in the paper: did the scene-typical original win over the replacement?
            context_captured=(to_target > to_gold) if row["condition"] in INCONGRUENT else None,
        )
    return rows


def _selection(item: Mapping[str, Any]) -> dict[str, Any]:
    """The run's selection counts (what the task left out of the release), when the doc
    carries them (:func:`lmms_scene.data.cooco.views.selection`)."""
    chosen = item.get("selection")
    return {"selection": dict(chosen)} if isinstance(chosen, Mapping) else {}


#: row fields computed with CLIP (``None`` when CLIP metrics are switched off)
CLIP_FIELDS = (
    "clip_score",
    "reference_similarity",
    "refclipscore",
    "text_similarity",
    "accuracy",
    "output_scene_similarity",
    "output_target_similarity",
    "context_captured",
)


# -- one doc at a time (process_results), with batch pre-scoring -----------------------

#: the memo namespace of rows scored ahead in batches (:func:`prescore`)
PRESCORED = "cooco-prescored"
PRESCORED_SIZE = 500_000


def require_metrics(model: str | None = None) -> None:
    """Load everything the COOCO metrics need (the CLIP checkpoint), so that a missing
    one stops a run when its task is built, before any answer is generated. Raises
    :class:`lmms_scene.metrics.clip.ClipModelUnavailable` saying how to get it."""
    name = clip_metrics.resolve_model(model)
    if not clip_metrics.switched_off(name):
        clip_metrics.encoder(name)


def doc_key(doc: Mapping[str, Any], output: Any, model: str) -> tuple:
    """Everything a scored row depends on, without decoding the image."""
    return (
        str(doc["image_id"]),
        str(doc["condition"]),
        str(doc.get("noise_area", NO_NOISE_AREA)),
        float(doc.get("noise_level", 0.0)),
        tuple(float(v) for v in doc["target_bbox"]),
        int(doc.get("width", 0)),
        int(doc.get("height", 0)),
        str(doc["scene"]),
        str(doc["target"]),
        str(doc["gold_label"]),
        output,
        model,
        tuple(sorted((doc.get("selection") or {}).items())),
    )


def _id_number(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _ids(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "image_id": str(doc.get("image_id", "?")),
        "condition": str(doc.get("condition", "?")),
        "noise_area": str(doc.get("noise_area", NO_NOISE_AREA)),
        "noise_level": _id_number(doc.get("noise_level", 0.0)),
    }


def unscored_row(doc: Mapping[str, Any], output: Any, reason: str, model: str | None) -> dict[str, Any]:
    """The row of an answer that could not be scored: ids, the answer and the reason;
    every metric not computed (``None``), never zero. Never raises."""
    text = shown_output(output)
    read = read_output(output) if isinstance(output, (str, bytes)) else None
    row = {
        **_ids(doc),
        "scene": normalise_label(doc.get("scene", "")),
        "target": normalise_label(doc.get("target", "")),
        "gold": normalise_label(doc.get("gold_label", "")),
        "output": text,
        "prediction": normalise_output(text),
        "empty": None,
        "output_words": None,
        "non_ascii": None,
        "output_sanitised": bool(read and read.sanitised),
        "output_changes": list(read.changes) if read else [],
        "scored": False,
        "unscored_reason": reason,
        "clip_model": model,
        "reading": str((doc.get("selection") or {}).get("reading") or CLEANED),
        "levenshtein_similarity": None,
        "levenshtein_accuracy": None,
        **_selection(doc),
    }
    row.update({name: None for name in CLIP_FIELDS})
    return row


def score_doc(doc: Mapping[str, Any], output: Any, model: str | None = None) -> dict[str, Any]:
    """Score one doc's answer (what ``process_results`` does). Uses the row
    :func:`prescore` computed for this exact doc and answer when there is one (same
    numbers, computed in batches); otherwise scores it here. Never raises: an answer that
    is not one text, a row the task's load-time check found bad
    (:func:`lmms_scene.data.recheck.problem_of`), a bad image or an untokenizable text is
    recorded unscored with its reason."""
    try:
        name = clip_metrics.resolve_model(model)
    except Exception as exc:  # a bad LMMS_SCENE_CLIP_MODEL: stopped when the task is built
        name = None
        return unscored_row(doc, output, f"{type(exc).__name__}: {exc}", name)
    read = read_output(output)
    problem = read.problem or recheck.problem_of(doc)
    if problem is not None:
        return unscored_row(doc, output, problem, name)
    if not isinstance(output, str):
        output = read.text  # one text in a list, or bytes: that text
    try:
        ahead = cache.memo_namespace(PRESCORED, PRESCORED_SIZE).get(doc_key(doc, output, name))
        if ahead is not None:
            return dict(ahead)
        return score_rows([views.naming_item(doc, output)], name)[0]
    except Exception as exc:  # a bad image, an untokenizable text, a CLIP that went away: recorded, never raised
        return unscored_row(doc, output, f"{type(exc).__name__}: {exc}", name)


def prescore(pairs: Iterable[tuple[Mapping[str, Any], Any]], model: str | None = None, chunk: int = 256) -> int:
    """Score ``(doc, answer)`` pairs in batches ahead of ``process_results`` (image
    embeddings once per crop, texts in batches of 256), keeping the rows for
    :func:`score_doc`. Pairs that fail are left to :func:`score_doc`, which records why.
    Returns how many rows were scored ahead."""
    name = clip_metrics.resolve_model(model)
    memo = cache.memo_namespace(PRESCORED, PRESCORED_SIZE)
    done = 0
    batch: list[tuple[tuple, dict[str, Any]]] = []

    def flush() -> int:
        if not batch:
            return 0
        try:
            rows = score_rows([item for _, item in batch], name)
        except Exception:
            batch.clear()
            return 0  # left to score_doc, row by row, which records the failing one
        for (key, _), row in zip(batch, rows):
            memo.put(key, row)
        n = len(batch)
        batch.clear()
        return n

    for doc, output in pairs:
        if not isinstance(output, str) or recheck.problem_of(doc) is not None:
            continue  # score_doc records why
        try:
            item = views.naming_item(doc, output)
            key = doc_key(doc, output, name)
        except Exception:
            continue
        batch.append((key, item))
        if len(batch) >= chunk:
            done += flush()
    return done + flush()


# -- aggregation --------------------------------------------------------------------

#: The fields that identify a scored COOCO row, and the resampling cluster of its intervals.
ID_FIELDS: tuple[str, ...] = ("image_id", "condition", "noise_area", "noise_level")
CLUSTER = "image_id"
#: what identifies the data a row scored (never the output): its item (one image of the
#: release; the noise settings of one task are views of it) and the item's labels. The
#: report's ``dataset`` fingerprint covers these (:func:`lmms_scene.metrics.rows.dataset_identity`),
#: so ``cooco`` and ``cooco_noise`` on one release share it
ITEM_FIELDS: tuple[str, ...] = ("image_id", "condition")
DATA_FIELDS: tuple[str, ...] = ("scene", "target", "gold")
DuplicateRowError = rows_lib.DuplicateRowError


def dedupe_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int]:
    """Rows deduplicated by :data:`ID_FIELDS` (first wins), sorted by id, and how many
    duplicates were dropped (see :func:`lmms_scene.metrics.rows.dedupe`)."""
    deduped = rows_lib.dedupe(rows, ID_FIELDS)
    return deduped.rows, deduped.n_duplicates


def unique_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows deduplicated by :data:`ID_FIELDS`, sorted by id."""
    return dedupe_rows(rows)[0]


def mean_of(rows: Iterable[Mapping[str, Any]], field: str) -> float | None:
    """Mean of ``field`` over unique rows, skipping ``None`` (no value for that row)."""
    return rows_lib.mean(r.get(field) for r in unique_rows(rows))


def level_key(level: float) -> str:
    """Noise level as a JSON key: ``0``, ``0.5``, ``1``."""
    return f"{float(level):g}"


def _capture(row: Mapping[str, Any]) -> Any:
    # context capture is defined on incongruent items only: elsewhere it is not applicable,
    # which is neither a value nor a value that failed to be computed
    return row.get("context_captured") if row["condition"] in INCONGRUENT else rows_lib.NOT_APPLICABLE


#: Breakdown cell entry -> the row field (or getter) it averages, in report order.
CELL_METRICS: dict[str, Any] = {
    "refclipscore": "refclipscore",
    "clip_score": "clip_score",
    "reference_similarity": "reference_similarity",
    "accuracy": "accuracy",
    "levenshtein_accuracy": "levenshtein_accuracy",
    "text_similarity": "text_similarity",
    "output_scene_similarity": "output_scene_similarity",
    "context_capture_rate": _capture,
    "empty_output_rate": "empty",
}


def _cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means of :data:`CELL_METRICS` with n, their 95% intervals (images resampled) and
    not-computed counts, and the median RefCLIPScore (``refclipscore_median``: the
    statistic the paper's Figure 3 draws, with its own 95% interval)."""
    cell = rows_lib.cell(rows, CELL_METRICS, cluster=CLUSTER)
    median, interval = median_refclipscore(rows)
    if median is not None:
        cell["refclipscore_median"] = median
        cell.setdefault("ci95", {})["refclipscore_median"] = interval
    return cell


def median_refclipscore(rows: Sequence[Mapping[str, Any]]) -> tuple[float | None, list[float] | None]:
    """The median RefCLIPScore of ``rows`` (rows without one left out) and its 95%
    percentile bootstrap interval, images resampled with the same draws as the means'
    (:func:`lmms_scene.metrics.rows.resample_counts`); None without a value, no interval
    with fewer than two images."""
    pairs = [(r[CLUSTER], float(v)) for r in rows if rows_lib.is_computed(v := r.get("refclipscore"))]
    if not pairs:
        return None, None
    values = np.array([v for _, v in pairs])
    median = float(np.median(values))
    ids: dict[Any, int] = {}
    index = np.array([ids.setdefault(c, len(ids)) for c, _ in pairs])
    if len(ids) < 2:
        return median, None
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_index = values[order], index[order]
    draws = []
    for counts in rows_lib.resample_counts(len(ids)):
        for weights in counts:
            # each value weighted by how often its image was drawn; the weighted median
            w = weights[sorted_index].astype(np.float64)
            total = w.sum()
            cum = np.cumsum(w)
            lo = int(np.searchsorted(cum, total / 2, side="left"))
            hi = int(np.searchsorted(cum, total / 2, side="right"))
            hi = min(hi, len(cum) - 1)
            draws.append((sorted_values[lo] + sorted_values[hi]) / 2 if cum[lo] == total / 2 else sorted_values[lo])
    return median, rows_lib.percentile_interval(np.asarray(draws, dtype=np.float64))


def reading_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
    """The rows the cells average, and what the reading left out. ``cleaned`` rows are
    all kept. ``authors`` rows follow the authors' selection: a row their code skipped
    (``dropped``: an empty answer, an answer over 77 CLIP tokens) is left out of every
    cell, and their hard (Levenshtein) accuracy leaves out every answer longer, after
    their cleaning, than the longest gold of the rows kept (data_analysis/analysis.py:
    ``df[df["output_clean"].apply(len) <= df["target_clean"].apply(len).max()]``). Each
    is counted."""
    readings = sorted({str(r.get("reading") or CLEANED) for r in rows})
    summary: dict[str, Any] = {"reading": readings[0] if len(readings) == 1 else readings or [CLEANED]}
    if AUTHORS not in readings:
        return list(rows), summary
    kept = [r for r in rows if not r.get("dropped")]
    dropped = [r for r in rows if r.get("dropped")]
    authors = [r for r in kept if r.get("reading") == AUTHORS and r.get("gold_chars") is not None]
    longest = max((int(r["gold_chars"]) for r in authors), default=None)
    out: list[Mapping[str, Any]] = []
    too_long = 0
    for row in kept:
        if longest is not None and row.get("reading") == AUTHORS and (row.get("hard_chars") or 0) > longest:
            row = {**row, "levenshtein_accuracy": rows_lib.NOT_APPLICABLE}
            too_long += 1
        out.append(row)
    summary.update(
        dropped_empty=sum(r.get("dropped") == "empty" for r in dropped),
        dropped_over_77_clip_tokens=sum(r.get("dropped") == "over_77_clip_tokens" for r in dropped),
        levenshtein_left_out_longer_than_longest_gold=too_long,
        longest_gold_chars=longest,
    )
    if any(r.get("reading") == AUTHORS and not r.get("clip_model") for r in rows):
        # without CLIP no tokenizer says which answers their CLIP would have refused
        summary["over_77_clip_tokens_not_checked"] = "CLIP switched off: answers over 77 tokens were kept"
    return out, summary


def overall_cell(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline cell: naming items only (clean images, scored on request, have their
    own cells), deduplicated by id, in the rows' reading (:func:`reading_rows`). The
    breakdown's ``overall`` and the leaderboard's recomputation from a submission's rows
    are this one function."""
    kept, _ = reading_rows(unique_rows(rows))
    return _cell([r for r in kept if r["condition"] != CLEAN])


def output_statistics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many answers were empty, verbose, non-ASCII or sanitised (all of them still
    scored), and which could not be scored at all (with their reasons)."""
    n = len(rows)
    unscored = [r for r in rows if r.get("scored") is False]
    counts = {
        "n_empty": sum(bool(r["empty"]) for r in rows),
        "n_verbose": sum((r.get("output_words") or 0) > VERBOSE_WORDS for r in rows),
        "n_non_ascii": sum(bool(r.get("non_ascii")) for r in rows),
        "n_sanitised": sum(bool(r.get("output_sanitised")) for r in rows),
        "n_unscored": len(unscored),
    }
    stats: dict[str, Any] = {"n": n, **counts}
    scored = n - len(unscored)  # rates over the answers that were scored, as in the cells
    for key, count in counts.items():
        if key == "n_unscored":
            stats["unscored_rate"] = len(unscored) / n if n else None
            continue
        stats[key[2:] + "_output_rate"] = count / scored if scored else None
    stats["mean_output_words"] = rows_lib.mean(r.get("output_words") for r in rows)
    stats["verbose_threshold_words"] = VERBOSE_WORDS
    # the first unscored rows with their reasons (all are counted above)
    stats["unscored"] = [
        {
            "image_id": r["image_id"],
            "condition": r["condition"],
            "noise_area": r["noise_area"],
            "noise_level": r["noise_level"],
            "reason": r.get("unscored_reason"),
        }
        for r in unscored[:20]
    ]
    return stats


def breakdown(rows: Iterable[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full COOCO report: overall means, means per condition x noise area x noise
    level (Figures 3-4), context-capture rates, output statistics and provenance."""
    all_unique, dropped = dedupe_rows(rows)
    unique, reading = reading_rows(all_unique)
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
        "clip_models": sorted({str(m) for r in all_unique if (m := r.get("clip_model"))}),
        "n_rows": len(all_unique),
        "n_duplicate_rows_dropped": dropped,
        "dataset": rows_lib.dataset_identity(all_unique, ITEM_FIELDS, DATA_FIELDS),
        "selection": selection_summary(all_unique),
        # which reading computed these numbers, and what the authors' reading left out
        "reading": reading,
        # naming items only: clean images (scored on request) have their own cells
        "overall": overall_cell(all_unique),
        "by_condition": {c: _cell([r for r in unique if r["condition"] == c]) for c in conditions},
        "by_condition_noise": by_cell,
        "context_capture_rate": rows_lib.mean(r["context_captured"] for r in incongruent),
        "context_capture_rate_among_wrong": rows_lib.mean(r["context_captured"] for r in wrong),
        "output_statistics": output_statistics(all_unique),
    }


def selection_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the run evaluated of the release and what it left out (excluded rows, clean
    images), from the counts every row carries; None for rows without them (e.g. a run
    logged before they existed). Rows of one task come from one dataset; if they
    disagree, every distinct count is listed under ``mixed``."""
    seen = []
    for row in rows:
        chosen = row.get("selection")
        if isinstance(chosen, Mapping) and dict(chosen) not in seen:
            seen.append(dict(chosen))
    if not seen:
        return None
    if len(seen) == 1:
        return seen[0]
    return {"mixed": seen}


def selection_line(chosen: Mapping[str, Any]) -> str:
    """One line saying what a run evaluated of the release and what it left out."""
    if "mixed" in chosen:
        return "rows from several selections: " + "; ".join(selection_line(c) for c in chosen["mixed"])
    evaluated = f"{chosen.get('evaluated')} of {chosen.get('release_rows')} release rows evaluated"
    if chosen.get("clean_included"):
        return f"{evaluated} (clean images included); left out {chosen.get('skipped_excluded')} excluded rows"
    return f"{evaluated}; left out {chosen.get('skipped_excluded')} excluded rows and {chosen.get('skipped_clean')} clean images"


def provenance(model: str | None = None, reading: str = CLEANED) -> dict[str, Any]:
    """What computed the COOCO scores (checkpoint, device, thresholds, reading, normaliser,
    versions)."""
    name = clip_metrics.resolve_model(model)
    authors = reading == AUTHORS
    enabled = clip_metrics.clip_enabled(name)
    clip = (
        {"clip_model": name}
        if enabled
        else {
            "clip_model": None,
            "clip_metrics": f"not computed: {clip_metrics.not_computed_reason(name) or 'switched off'}",
        }
    )
    return scorer(
        "cooco_naming",
        checkpoint=name if enabled else None,
        device=clip_metrics.default_device() if enabled else None,
        thresholds={
            "accuracy_text_cosine": ACCURACY_THRESHOLD,
            "levenshtein_similarity": LEVENSHTEIN_THRESHOLD,
            "clip_s_weight": clip_metrics.CLIP_S_WEIGHT,
            "verbose_words": VERBOSE_WORDS,
        },
        libraries=("transformers", "torch", "rapidfuzz"),
        **clip,
        clip_s_weight=clip_metrics.CLIP_S_WEIGHT,
        accuracy_threshold=ACCURACY_THRESHOLD,
        levenshtein_threshold=LEVENSHTEIN_THRESHOLD,
        levenshtein="rapidfuzz.fuzz.ratio/100",
        reading=reading,
        **(
            {
                "authors_selection": "rows with an empty answer or an answer over 77 CLIP tokens left out and counted; "
                "Levenshtein accuracy without answers longer than the longest gold"
            }
            if authors
            else {}
        ),
        normaliser=AUTHORS_NORMALISER if authors else NORMALISER_VERSION,
        gold="the label as the authors spell it (CLIP); without ' (...)' (Levenshtein)"
        if authors
        else "the label without ' (...)' (every metric)",
        long_form="A photo depicts a/an {name}",
        image=(
            "target crop of the grey-padded square image before noise, saved as JPEG quality 75 and read back"
            if authors
            else "target crop of the grey-padded square image before noise"
        ),
        intervals=f"95% percentile bootstrap over images, {rows_lib.N_BOOT} resamples, seed {rows_lib.SEED}",
    )


# -- lmms-eval glue: one scored row, several metric keys --------------------------------

#: the row field a task metric averages, where it is not the metric's own name
ROW_FIELDS: dict[str, str] = {"context_capture_rate": "context_captured", "empty_output_rate": "empty"}
#: Task metric key -> the row field it averages: the task's metric list as the registry
#: declares it (lmms_scene/benchmarks.py), less the report (:data:`BREAKDOWN_KEY`), in its order.
HEADLINE: dict[str, str] = {
    m.name: ROW_FIELDS.get(m.name, m.name) for m in benchmarks.get("cooco").task_metrics() if not m.report
}
#: the task's report metric, as the registry declares it
BREAKDOWN_KEY = benchmarks.get("cooco").report_key
#: ``scorer.clip_model`` when the rows were scored with more than one CLIP checkpoint.
MIXED_CLIP_MODELS = "mixed"


def metric_entries(row: Mapping[str, Any]) -> dict[str, Any]:
    """What ``process_results`` returns for one scored row: the full row under
    :data:`BREAKDOWN_KEY` and, per headline metric, the row's ids and output plus ``score``
    (absent when the row has no value for that metric, e.g. capture on congruent items).
    lmms-eval reads ``score`` for its CLT standard errors; the output lets every key's
    aggregation tell a re-gathered copy from a conflicting second answer."""
    ids = {**{k: row[k] for k in ID_FIELDS}, "output": row.get("output")}
    out: dict[str, Any] = {BREAKDOWN_KEY: dict(row)}
    naming_item = row.get("condition") != CLEAN  # a clean image is never in a headline mean
    for key, field in HEADLINE.items():
        value = row.get(field)
        out[key] = {**ids, "score": float(value)} if value is not None and naming_item else dict(ids)
    if row.get("reading") == AUTHORS and "score" in out["levenshtein_accuracy"]:
        # the authors' hard accuracy leaves out answers longer than the longest gold of
        # the run: the aggregation needs both lengths (:func:`mean_score`)
        out["levenshtein_accuracy"].update(hard_chars=row.get("hard_chars"), gold_chars=row.get("gold_chars"))
    return out


def mean_score(entries: Iterable[Mapping[str, Any]]) -> float | None:
    """Mean ``score`` over entries deduplicated by id (an aggregation for lmms-eval).
    Entries that carry ``gold_chars`` (the authors' reading's Levenshtein accuracy) are
    kept only when their ``hard_chars`` is at most the longest ``gold_chars`` among the
    scored entries, as :func:`reading_rows` does."""
    unique = unique_rows(entries)
    lengths = [int(e["gold_chars"]) for e in unique if e.get("gold_chars") is not None and e.get("score") is not None]
    if lengths:
        longest = max(lengths)
        unique = [e for e in unique if e.get("gold_chars") is None or int(e.get("hard_chars") or 0) <= longest]
    return rows_lib.mean(e.get("score") for e in unique)


def report(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`breakdown` with the provenance of the checkpoint the rows were scored with.

    lmms-eval 0.7.3 writes this dict into the results JSON as it is; its printed table
    shows it in one wide cell (pytablewriter formats dicts itself, so no summary string
    can replace it there without changing what the JSON holds)."""
    rows = list(rows)
    models = sorted({str(r.get("clip_model")) for r in rows if r.get("clip_model")})
    if rows and not models:
        # every row was scored without CLIP: say why as this process knows it (switched
        # off, or not at hand in a sample run: clip.not_computed_reason)
        models = [clip_metrics.resolve_model() if not clip_metrics.clip_enabled() else clip_metrics.CLIP_DISABLED]
    readings = sorted({str(r.get("reading") or CLEANED) for r in rows}) or [CLEANED]
    reading = readings[0] if len(readings) == 1 else MIXED_READINGS
    if len(models) > 1:
        # Rows scored with several checkpoints: name none of them (least of all the
        # env/default one); ``clip_models`` in the breakdown lists them.
        record = provenance(models[0], reading)
        record.pop("clip_metrics", None)
        record.update(clip_model=MIXED_CLIP_MODELS, clip_models=models)
        return breakdown(rows, record)
    return breakdown(rows, provenance(models[0] if models else None, reading))


# -- Figures 3-4 (their tables are :func:`lmms_scene.metrics.cooco.tables.view`) -----------

#: Column order of Figure 4: no noise, then each area at 0.5 and 1.0.
FIGURE4_SETTINGS: tuple[tuple[str, str], ...] = (("none", "0"),) + tuple(
    (area, level) for area in ("context", "target", "all") for level in ("0.5", "1")
)


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
