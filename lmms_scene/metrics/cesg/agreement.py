"""Metric-versus-judge agreement (the SNUS paper's Table 3) and the weight ablation (Table 4).

Per-sample metric scores are compared with judge or human scores: Pearson r, R^2 of the
linear fit (= r^2), Kendall tau, Goodman-Kruskal gamma (Table 3's "Sa gamma": concordant
minus discordant pairs over their sum, tied pairs left out), Spearman rho (scipy.stats),
and pairwise accuracy within
the same image (over pairs of captions of one image that the reference score orders, the
fraction the metric orders the same way; a metric tie counts one half). Every statistic
gets a 95% percentile bootstrap interval with images resampled (the seeded resamples of
:func:`lmms_scene.metrics.rows.resample_counts`). Rows whose reference score or metric is
missing (a judge failure) are excluded and counted.

The ablation recomputes CESG = w_o F1_o + w_a F1_a + w_r F1_r for each weight triple from
the rows' F1 columns and reports the same statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.cesg.match import weighted

STATISTICS = ("pearson_r", "r2", "kendall_tau", "goodman_kruskal_gamma", "spearman_rho", "pairwise_accuracy")
#: Table 4's weight grid (w_o, w_a, w_r)
TABLE4_WEIGHTS = (
    (1.0, 0.0, 0.0),
    (0.0, 1.0, 0.0),
    (0.0, 0.0, 1.0),
    (0.0, 0.5, 0.5),
    (0.5, 0.5, 0.0),
    (0.5, 0.0, 0.5),
    (1 / 3, 1 / 3, 1 / 3),
    (0.5, 0.25, 0.25),
)


def _number(v: Any) -> float | None:
    """A score as a float; None when it is missing (None, NaN, not a number: excluded and
    counted). An infinite score is no score at all: :func:`check_finite` refuses it."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if not math.isfinite(f) else f


def check_finite(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], where: Callable[[int], str] | None = None
) -> None:
    """``ValueError`` naming the row, the column and the value when a score in ``columns``
    is infinite (JSON's ``Infinity``): a metric or a judge cannot score a caption
    infinitely well, so the file is wrong, and an infinite value would silently turn every
    statistic into NaN."""
    for i, row in enumerate(rows):
        for name in columns:
            value = row.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isinf(value):
                at = where(i) if where else f"row {i}"
                raise ValueError(f"{at}: field {name!r}: {value!r} is not a score (an infinite value)")


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinities) replaced by None, through
    dicts and lists: what JSON output may hold (strict JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def _pairwise(metric: np.ndarray, target: np.ndarray, groups: np.ndarray) -> float | None:
    agree = total = 0.0
    for g in np.unique(groups):
        idx = np.nonzero(groups == g)[0]
        for a in range(len(idx)):
            for b in range(a + 1, len(idx)):
                i, j = idx[a], idx[b]
                dt = target[i] - target[j]
                if dt == 0:
                    continue
                dm = metric[i] - metric[j]
                total += 1
                agree += 1.0 if dm * dt > 0 else 0.5 if dm == 0 else 0.0
    return agree / total if total else None


def _tied_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def goodman_kruskal_gamma(x: Sequence[float], y: Sequence[float]) -> float | None:
    """(C - D) / (C + D) over all pairs, C concordant, D discordant, pairs tied in x or y
    left out; None when no pair is untied. O(n log n): C - D comes from Kendall's tau-b
    (tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2))) and C + D = n0 - n1 - n2 + n3, with n0 all
    pairs, n1 / n2 pairs tied in x / y, n3 pairs tied in both."""
    from scipy import stats  # deferred: SciPy is heavy to import

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(a)
    n0 = n * (n - 1) // 2
    n1, n2 = _tied_pairs(a), _tied_pairs(b)
    n3 = _tied_pairs(np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].ravel()) if n else 0
    untied = n0 - n1 - n2 + n3
    if untied <= 0 or n0 == n1 or n0 == n2:
        return None
    tau_b = float(stats.kendalltau(a, b, variant="b")[0])
    return float(np.clip(tau_b * np.sqrt(float(n0 - n1) * float(n0 - n2)) / untied, -1.0, 1.0))


def statistics(metric: Sequence[float], target: Sequence[float], groups: Sequence[Any]) -> dict[str, float | None]:
    from scipy import stats  # deferred: SciPy is heavy to import

    m, t = np.asarray(metric, dtype=float), np.asarray(target, dtype=float)
    out: dict[str, float | None] = {s: None for s in STATISTICS}
    if len(m) >= 2 and np.ptp(m) > 0 and np.ptp(t) > 0:
        r = float(stats.pearsonr(m, t)[0])
        out.update(
            pearson_r=r,
            r2=r * r,
            kendall_tau=float(stats.kendalltau(m, t)[0]),
            goodman_kruskal_gamma=goodman_kruskal_gamma(m, t),
            spearman_rho=float(stats.spearmanr(m, t)[0]),
        )
    out["pairwise_accuracy"] = _pairwise(m, t, np.asarray([str(g) for g in groups]))
    # a statistic scipy cannot compute (NaN) is not computed: None, never NaN in a report
    return {k: (None if v is not None and not math.isfinite(v) else v) for k, v in out.items()}


def agreement(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    target: str,
    group: str = "image_id",
    *,
    n_boot: int = 1000,
    seed: int = rows_lib.SEED,
) -> dict[str, Any]:
    """Agreement of each metric column with the ``target`` column; see the module docstring."""
    if not rows:
        raise ValueError("agreement: no rows")
    for i, row in enumerate(rows):
        if group not in row:
            raise KeyError(f"row {i}: missing the grouping field {group!r} (the image id)")
    check_finite(rows, [*metrics, target])
    out: dict[str, Any] = {"target": target, "group": group, "n_boot": n_boot, "seed": seed, "metrics": {}}
    for name in metrics:
        usable = [(r, _number(r.get(name)), _number(r.get(target))) for r in rows]
        kept = [(r[group], m, t) for r, m, t in usable if m is not None and t is not None]
        excluded = len(rows) - len(kept)
        groups = [k[0] for k in kept]
        m = np.array([k[1] for k in kept])
        t = np.array([k[2] for k in kept])
        point = statistics(m, t, groups)
        intervals = _bootstrap(m, t, groups, n_boot, seed)
        out["metrics"][name] = {
            "n": len(kept),
            "excluded": excluded,
            **{s: {"value": point[s], "ci95": intervals[s]} for s in STATISTICS},
        }
    return out


def _bootstrap(
    m: np.ndarray, t: np.ndarray, groups: list[Any], n_boot: int, seed: int
) -> dict[str, list[float] | None]:
    ids: dict[Any, int] = {}
    index = np.array([ids.setdefault(g, len(ids)) for g in groups], dtype=int)
    members = [np.nonzero(index == c)[0] for c in range(len(ids))]
    draws: dict[str, list[float]] = {s: [] for s in STATISTICS}
    if len(ids) < 2:
        return {s: None for s in STATISTICS}
    for chunk in rows_lib.resample_counts(len(ids), n_boot, seed):
        for counts in chunk:
            rows_idx, new_groups = [], []
            for c, k in enumerate(counts):
                for copy in range(int(k)):
                    rows_idx.extend(members[c])
                    new_groups.extend([(c, copy)] * len(members[c]))
            idx = np.asarray(rows_idx, dtype=int)
            stat = statistics(m[idx], t[idx], new_groups)
            for s in STATISTICS:
                draws[s].append(np.nan if stat[s] is None else stat[s])
    return {s: rows_lib.percentile_interval(np.asarray(v)) for s, v in draws.items()}


def weight_grid(
    rows: Sequence[Mapping[str, Any]],
    target: str,
    weights: Sequence[Sequence[float]] = TABLE4_WEIGHTS,
    group: str = "image_id",
    *,
    n_boot: int = 1000,
    seed: int = rows_lib.SEED,
) -> list[dict[str, Any]]:
    """Table 4: agreement of CESG recomputed from F1_o, F1_a, F1_r under each weight triple."""
    out = []
    for w in weights:
        if len(w) != 3 or any(x < 0 for x in w) or sum(w) <= 0:
            raise ValueError(f"weights: expected non-negative (w_o, w_a, w_r) with a positive sum, got {tuple(w)!r}")
        col = f"CESG[{w[0]:.3g},{w[1]:.3g},{w[2]:.3g}]"

        derived = []
        for r in rows:
            # a type empty on both sides (F1 None) is left out and the weights renormalised,
            # as the per-row CESG does
            derived.append({**r, col: weighted([_number(r.get(k)) for k in ("F1_o", "F1_a", "F1_r")], w)})
        res = agreement(derived, [col], target, group, n_boot=n_boot, seed=seed)["metrics"][col]
        out.append({"w_o": w[0], "w_a": w[1], "w_r": w[2], **res})
    return out
