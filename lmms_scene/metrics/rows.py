"""Scored rows and their aggregation, shared by every benchmark.

A *row* is one scored answer as a flat JSON-ready dict: its stable ids (declared per
benchmark: ``image_id, condition, noise_area, noise_level`` for COOCO; ``scene_id,
question_id, schedule`` for Layered-VQA) and its per-item scores. lmms-eval gathers
rows from several processes out of doc order and may gather a row twice, so every
aggregation here deduplicates by the declared ids and never relies on order.

A score of ``None`` (or NaN) means *not computed* for that row (an empty answer has no
similarity; a judge failed): it is left out of means and counted, never read as 0.

Intervals are percentile bootstrap intervals over *clusters* (images for COOCO, scenes
for Layered-VQA; each row its own cluster by default), seeded, so a result file is
reproducible. :func:`bootstrap_interval` is the one implementation: every breakdown
cell uses it, and Pfram's interval over anchors (:func:`lmms_scene.analysis.pfram.bootstrap_interval`)
calls it.

>>> rows = [{"id": i, "img": i // 2, "score": s} for i, s in enumerate([1, 0, 1, 1, None])]
>>> summary(rows, "score", cluster="img", n_boot=200)["mean"]
0.75
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from lmms_scene import cache
from lmms_scene.validation import field_names, non_negative_int, probability

T = TypeVar("T")

#: Bootstrap defaults: resamples, confidence level and seed of every interval we write.
N_BOOT = 1000
LEVEL = 0.95
SEED = 0
#: Resample draws are made in chunks of at most this many cluster indices (memory bound).
_CHUNK_ELEMENTS = 4_000_000


class _NotApplicable:
    """Marks a row for which a metric is not defined (e.g. context capture on a congruent
    COOCO item): left out of that metric's mean and *not* counted as not computed."""

    def __repr__(self) -> str:
        return "NOT_APPLICABLE"


NOT_APPLICABLE = _NotApplicable()


class DuplicateRowError(ValueError):
    """Two rows share an id but disagree on the model output."""


@dataclass(frozen=True)
class Deduped:
    """Rows kept (sorted by id) and how many duplicates were dropped."""

    rows: list[Mapping[str, Any]]
    n_duplicates: int


def row_id(row: Mapping[str, Any], id_fields: Sequence[str]) -> tuple:
    """The id of ``row``: its values of ``id_fields``, numbers as floats (so ``0`` and
    ``0.0`` are one id). Raises ``KeyError`` naming the missing field and the row."""
    out = []
    for name in id_fields:
        if name not in row:
            raise KeyError(f"row has no id field {name!r} (id fields: {list(id_fields)}); row keys: {sorted(row)}")
        value = row[name]
        out.append(float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value)
    return tuple(out)


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v, "") if isinstance(v, float) else (1, 0.0, str(v)) for v in key)


def dedupe(rows: Iterable[Mapping[str, Any]], id_fields: Sequence[str], same: Sequence[str] = ("output",)) -> Deduped:
    """Rows deduplicated by ``id_fields`` (first wins), sorted by id, with the number of
    duplicates dropped. A duplicate must be a re-gathered copy: when two rows with one
    id differ on a field in ``same`` (the model output), :class:`DuplicateRowError`
    names the id and both values."""
    id_fields = field_names(id_fields, "id_fields")
    same = field_names(same, "same", allow_empty=True)
    seen: dict[tuple, Mapping[str, Any]] = {}
    dropped = 0
    for row in rows:
        if not isinstance(row, Mapping):
            raise TypeError(f"rows: expected mappings, got {type(row).__name__}: {row!r:.200}")
        key = row_id(row, id_fields)
        first = seen.get(key)
        if first is None:
            seen[key] = row
            continue
        dropped += 1
        for name in same:
            if first.get(name) != row.get(name):
                raise DuplicateRowError(
                    f"rows with the same id {dict(zip(id_fields, key))} have different {name!r}: "
                    f"{first.get(name)!r} vs {row.get(name)!r}"
                )
    return Deduped([seen[k] for k in sorted(seen, key=_sort_key)], dropped)


def is_computed(value: Any) -> bool:
    """Whether a row's value counts (not None, not NaN)."""
    if value is None:
        return False
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        raise TypeError(
            f"score values must be numbers, booleans or None, got {type(value).__name__}: {value!r:.100}"
        ) from None


def mean(values: Iterable[Any]) -> float | None:
    """Mean over computed values (see :func:`is_computed`); None when there are none."""
    vals = [float(v) for v in values if is_computed(v)]
    return sum(vals) / len(vals) if vals else None


def group(rows: Iterable[Mapping[str, Any]], by: Sequence[str]) -> dict[tuple, list[Mapping[str, Any]]]:
    """Rows grouped by their values of the fields ``by`` (insertion order kept)."""
    by = field_names(by, "by")
    out: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(row.get(f) for f in by), []).append(row)
    return out


# -- intervals -------------------------------------------------------------------------


def _cluster_index(n: int, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, int]:
    if clusters is None:
        return np.arange(n), n
    if len(clusters) != n:
        raise ValueError(f"clusters: {len(clusters)} cluster ids for {n} values")
    ids: dict[Hashable, int] = {}
    index = np.fromiter((ids.setdefault(c, len(ids)) for c in clusters), dtype=np.int64, count=n)
    return index, len(ids)


def resample_counts(n_clusters: int, n_boot: int = N_BOOT, seed: int = SEED) -> Iterable[np.ndarray]:
    """The bootstrap resamples as counts: chunks of shape ``(b, n_clusters)`` whose row
    ``j`` says how often each cluster was drawn in resample ``j``. Resample ``j`` draws
    ``n_clusters`` cluster indices uniformly with replacement, as row ``j`` of
    ``numpy.random.default_rng(seed).integers(0, n_clusters, size=(n_boot, n_clusters))``."""
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_ELEMENTS // max(n_clusters, 1))
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_clusters, size=(b, n_clusters))
        offsets = draws + (np.arange(b) * n_clusters)[:, None]
        yield np.bincount(offsets.ravel(), minlength=b * n_clusters).reshape(b, n_clusters)


def bootstrap_means(
    columns: Mapping[str, Sequence[Any]],
    clusters: Sequence[Hashable] | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, np.ndarray]:
    """Bootstrap distribution of the mean of each column (all columns resampled with the
    same cluster draws). A resampled mean is over the computed values of the drawn
    clusters, a cluster counted as often as it was drawn; NaN when none was computed."""
    n_boot = non_negative_int(n_boot, "n_boot", minimum=1)
    lengths = {name: len(v) for name, v in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"columns differ in length: {lengths}")
    n = next(iter(lengths.values()), 0)
    index, n_clusters = _cluster_index(n, clusters)
    sums, counts = {}, {}
    for name, values in columns.items():
        vals = np.array([float(v) if is_computed(v) else np.nan for v in values], dtype=np.float64)
        ok = ~np.isnan(vals)
        sums[name] = np.bincount(index[ok], weights=vals[ok], minlength=n_clusters)
        counts[name] = np.bincount(index[ok], minlength=n_clusters).astype(np.float64)
    out: dict[str, list[np.ndarray]] = {name: [] for name in columns}
    if n_clusters == 0:
        return {name: np.full(n_boot, np.nan) for name in columns}
    for weights in resample_counts(n_clusters, n_boot, seed):
        w = weights.astype(np.float64)
        for name in columns:
            total, k = w @ sums[name], w @ counts[name]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[name].append(np.where(k > 0, total / np.where(k > 0, k, 1), np.nan))
    return {name: np.concatenate(parts) for name, parts in out.items()}


def percentile_interval(distribution: np.ndarray, level: float = LEVEL) -> list[float] | None:
    """The central ``level`` percentile interval of a bootstrap distribution (NaNs, from
    resamples with nothing computed, left out); None when it is empty."""
    level = probability(level, "level", open_interval=True)
    finite = distribution[~np.isnan(distribution)]
    if finite.size == 0:
        return None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return [float(lo), float(hi)]


def bootstrap_interval(
    values: Sequence[Any],
    clusters: Sequence[Hashable] | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> list[float] | None:
    """Seeded percentile bootstrap interval of the mean of ``values``, resampling
    ``clusters`` (one id per value; each value its own cluster when None).

    None when fewer than two clusters have a computed value (no spread to resample).

    >>> bootstrap_interval([0, 1] * 50, n_boot=500)[0] < 0.5 < bootstrap_interval([0, 1] * 50, n_boot=500)[1]
    True
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"values: expected a sequence of numbers, got {type(values).__name__}: {values!r:.100}")
    computed_clusters = (
        {(clusters[i] if clusters is not None else i) for i, v in enumerate(values) if is_computed(v)}
        if clusters is None or len(clusters) == len(values)
        else None
    )
    if computed_clusters is None:
        raise ValueError(f"clusters: {len(clusters)} cluster ids for {len(values)} values")
    if len(computed_clusters) < 2:
        return None
    dist = bootstrap_means({"v": values}, clusters, n_boot=n_boot, seed=seed)["v"]
    return percentile_interval(dist, level)


# -- summaries and breakdowns ------------------------------------------------------------


def cell(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] | Mapping[str, str | Callable[[Mapping[str, Any]], Any]],
    cluster: str | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> dict[str, Any]:
    """One breakdown cell: ``n`` rows; per metric the mean over computed values (absent
    when none was), its bootstrap interval under ``ci95`` and, when some rows had no
    value, their count under ``not_computed``. ``metrics`` lists row fields, or maps an
    output name to the row field it averages or to a getter ``row -> value`` (which may
    return :data:`NOT_APPLICABLE` to leave a row out uncounted). All metrics of a cell
    are resampled with the same cluster draws."""
    if isinstance(metrics, Mapping):
        names = dict(metrics)
    else:
        names = {f: f for f in field_names(metrics, "metrics")}
    clusters_all = [r.get(cluster) for r in rows] if cluster else None
    if clusters_all is not None and any(c is None for c in clusters_all):
        missing = next(r for r in rows if r.get(cluster) is None)
        raise KeyError(f"cluster field {cluster!r} missing from a row: {dict(missing)!r:.300}")
    out: dict[str, Any] = {"n": len(rows)}
    intervals: dict[str, list[float] | None] = {}
    not_computed: dict[str, int] = {}
    wanted: dict[str, list[Any]] = {}
    for name, spec in names.items():
        getter = spec if callable(spec) else (lambda r, f=spec: r.get(f))
        values = [getter(r) for r in rows]
        applicable = [i for i, v in enumerate(values) if v is not NOT_APPLICABLE]
        values = [None if v is NOT_APPLICABLE else v for v in values]
        missing = sum(not is_computed(values[i]) for i in applicable)
        if missing:
            not_computed[name] = missing
        m = mean(values)
        if m is None:
            continue
        out[name] = m
        computed = {(clusters_all[i] if clusters_all else i) for i, v in enumerate(values) if is_computed(v)}
        if len(computed) >= 2:
            wanted[name] = values
        else:
            intervals[name] = None
    if wanted:
        dists = bootstrap_means(wanted, clusters_all, n_boot=n_boot, seed=seed)
        for name, dist in dists.items():
            intervals[name] = percentile_interval(dist, level)
    if intervals:
        out["ci95" if level == LEVEL else f"ci{round(level * 100)}"] = {
            k: intervals[k] for k in names if k in intervals
        }
    if not_computed:
        out["not_computed"] = not_computed
    return out


def summary(
    rows: Sequence[Mapping[str, Any]],
    field: str,
    cluster: str | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> dict[str, Any]:
    """``{"mean", "n", "n_not_computed", "ci95"}`` of one field over ``rows``."""
    values = [r.get(field) for r in rows]
    clusters = [r.get(cluster) for r in rows] if cluster else None
    return {
        "mean": mean(values),
        "n": sum(is_computed(v) for v in values),
        "n_not_computed": sum(not is_computed(v) for v in values),
        "ci95": bootstrap_interval(values, clusters, n_boot=n_boot, seed=seed, level=level),
    }


def breakdown(
    rows: Sequence[Mapping[str, Any]],
    by: Sequence[str],
    metrics: Sequence[str] | Mapping[str, str],
    cluster: str | None = None,
    *,
    order: Mapping[str, Sequence[Any]] | None = None,
    key: Callable[[str, Any], str] | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """Nested cells: ``{by[0] value: {by[1] value: ... cell}}``. Values are ordered by
    ``order[field]`` where given (unknown values after, sorted), else sorted; ``key(field,
    value)`` turns a value into its JSON key (default ``str``)."""
    by = field_names(by, "by")
    order = order or {}
    key = key or (lambda _f, v: str(v))

    def ordered(field: str, values: Iterable[Any]) -> list[Any]:
        values = list(dict.fromkeys(values))
        known = [v for v in order.get(field, ()) if v in values]
        rest = sorted((v for v in values if v not in known), key=lambda v: (isinstance(v, str), v))
        return known + rest

    def level(subset: Sequence[Mapping[str, Any]], depth: int) -> dict[str, Any]:
        if depth == len(by):
            return cell(subset, metrics, cluster, n_boot=n_boot, seed=seed)
        field = by[depth]
        groups = group(subset, [field])
        return {key(field, v): level(groups[(v,)], depth + 1) for v in ordered(field, (g[0] for g in groups))}

    return level(list(rows), 0)


# -- corpus-level metrics ----------------------------------------------------------------


def corpus_digest(
    rows: Iterable[Mapping[str, Any]], id_fields: Sequence[str], content_fields: Sequence[str] = ("output",)
) -> str:
    """A digest of a corpus: its rows' ids and contents, independent of row order and of
    duplicates (so every metric key of one task run, and one or two processes, agree)."""
    deduped = dedupe(rows, id_fields, same=content_fields).rows
    h = hashlib.sha256()
    for row in deduped:
        record = [list(row_id(row, id_fields)), [row.get(f) for f in content_fields]]
        h.update(json.dumps(record, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def corpus_value(
    name: str,
    rows: Iterable[Mapping[str, Any]],
    compute: Callable[[list[Mapping[str, Any]]], T],
    *,
    id_fields: Sequence[str],
    content_fields: Sequence[str] = ("output",),
) -> T:
    """Compute a corpus-level metric once per corpus and share it.

    lmms-eval calls each metric key's aggregation separately, with the list of that
    key's per-document values. When every key's values carry the row (ids and output),
    each aggregation calls ``corpus_value(name, values, compute, ...)``: the first call
    runs ``compute(rows)`` on the deduplicated rows sorted by id, later calls with the
    same corpus (same ids and ``content_fields``, any order) get the same object.
    Thread-safe: concurrent callers wait for the one computation. A ``compute`` that
    raises caches nothing.
    """
    rows = list(rows)
    deduped = dedupe(rows, id_fields, same=content_fields).rows
    digest = corpus_digest(deduped, id_fields, content_fields)
    return cache.memo("corpus", (name, digest), lambda: compute(deduped))


# -- which data a run scored ---------------------------------------------------------------


def dataset_identity(
    rows: Iterable[Mapping[str, Any]], id_fields: Sequence[str], data_fields: Sequence[str]
) -> dict[str, Any]:
    """The identity of the data a run scored: a fingerprint of its items (``id_fields``:
    what identifies an item of the dataset, not a task's row: noise settings, schedules and
    repeats are views of one item) and their data fields (gold labels, references,
    questions: never the model's outputs), the number of distinct items, and the fields
    the fingerprint covers. Two runs on the same items get the same fingerprint whatever
    the order, the process count, the model or the view; a rebuilt dataset whose gold or
    ids differ gets another one. Images are not part of it.

    >>> a = dataset_identity([{"id": 1, "gold": "cat", "output": "x"}], ["id"], ["gold"])
    >>> b = dataset_identity([{"id": 1, "gold": "cat", "output": "y"}], ["id"], ["gold"])
    >>> a == b, a["n_rows"]
    (True, 1)
    """
    deduped = dedupe(rows, id_fields, same=()).rows
    return {
        "fingerprint": corpus_digest(deduped, id_fields, data_fields),
        "n_rows": len(deduped),
        "fields": [*id_fields, *data_fields],
    }


# -- rows that could not be scored -----------------------------------------------------------

#: how many unscored rows a report names with their reasons (all of them are counted)
UNSCORED_LISTED = 20


def unscored_summary(
    rows: Iterable[Mapping[str, Any]], id_fields: Sequence[str], limit: int = UNSCORED_LISTED
) -> dict[str, Any]:
    """What a report says about the rows recorded unscored (``scored`` False, with an
    ``unscored_reason``): ``n_unscored``, every one counted, and ``unscored``, the first
    ``limit`` of them (in the order given) with their ids and reason.

    >>> unscored_summary([{"id": 1, "scored": False, "unscored_reason": "no model output"}, {"id": 2}], ["id"])
    {'n_unscored': 1, 'unscored': [{'id': 1, 'reason': 'no model output'}]}
    """
    unscored = [r for r in rows if r.get("scored") is False]
    return {
        "n_unscored": len(unscored),
        "unscored": [
            {**{k: r.get(k) for k in id_fields}, "reason": r.get("unscored_reason")} for r in unscored[:limit]
        ],
    }
