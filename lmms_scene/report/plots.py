"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes.

Every point is a mean the results hold and every error bar its 95% interval as the
results hold it; nothing is recomputed here. matplotlib is imported inside the
functions (importing the package draws nothing).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from lmms_scene.report.tables import Value

#: (label, Value or None) series per group
Series = Mapping[str, Sequence[Value | None]]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return buf.getvalue()


def _errors(values: Sequence[Value | None]) -> tuple[list[float], list[list[float]]]:
    """Means (nan when missing) and asymmetric error bars (0 when no interval)."""
    nan = float("nan")
    means = [v.mean if v is not None and v.mean is not None else nan for v in values]
    lo = [(m - v.ci95[0]) if v is not None and v.ci95 else 0.0 for m, v in zip(means, values)]
    hi = [(v.ci95[1] - m) if v is not None and v.ci95 else 0.0 for m, v in zip(means, values)]
    return means, [[max(x, 0.0) for x in lo], [max(x, 0.0) for x in hi]]


def grouped_bars(groups: Sequence[str], series: Series, title: str, ylabel: str) -> bytes:
    """One bar per series in each group, with 95% interval error bars."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(groups) * max(1, len(series)) ** 0.5 + 2), 3.4))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        means, err = _errors(values)
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, means, width, yerr=err, capsize=3, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30 if len(groups) > 6 else 0, ha="right" if len(groups) > 6 else "center")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1 or any(series):
        ax.legend(fontsize=8, loc="best")
    return _png(fig)


def level_lines(panels: Mapping[str, Mapping[str, Sequence[tuple[float, Value | None]]]], title: str,
                ylabel: str) -> bytes:  # fmt: skip
    """One panel per noise area; in each, one line per relatedness condition over the noise
    levels, with 95% interval error bars (the layout of COOCO's Figure 4)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(3.3 * max(1, len(panels)) + 1, 3.2), sharey=True,
                             squeeze=False)  # fmt: skip
    for ax, (area, lines) in zip(axes[0], panels.items()):
        for j, (condition, points) in enumerate(lines.items()):
            pts = [(x, v) for x, v in points if v is not None]
            if not pts:
                continue
            means, err = _errors([v for _, v in pts])
            # a small horizontal offset per condition keeps equal means and their bars apart
            shift = (j - (len(lines) - 1) / 2) * 0.02
            ax.errorbar([x + shift for x, _ in pts], means, yerr=err, marker="o", capsize=3, label=condition)
        ax.set_title(f"noise on {area}", fontsize=9)
        ax.set_xlabel("noise level")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def layer_curves(curves: Mapping[str, tuple[Sequence[str], Sequence[Value | None]]], title: str) -> bytes:
    """Score per layer, one line per curve, the 95% interval shaded when present."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for name, (layers, values) in curves.items():
        xs = list(range(len(layers)))
        means, err = _errors(values)
        line = ax.plot(xs, means, marker="o", label=name)[0]
        if any(v is not None and v.ci95 for v in values):
            lo = [m - e for m, e in zip(means, err[0])]
            hi = [m + e for m, e in zip(means, err[1])]
            ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
        ax.set_xticks(xs)
        ax.set_xticklabels(layers, rotation=45, ha="right", fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("Pfram")
    ax.set_xlabel("layer")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)
