"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes.

Every point is a mean the results hold and every error bar its 95% interval as the
results hold it; nothing is recomputed here. matplotlib is imported inside the
functions (importing the package draws nothing).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: report.tables imports this module to draw its plots
    from lmms_scene.report.tables import Value

#: (label, Value or None) series per group
Series = Mapping[str, Sequence["Value | None"]]


#: every text at least 10 pt: at the 80 dpi the figures are saved at, that is 11 px
FONT = 10


def _pyplot():
    import matplotlib  # deferred: matplotlib is heavy to import

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy to import

    plt.rcParams.update(
        {
            "font.size": FONT,
            "axes.titlesize": FONT + 1,
            "axes.labelsize": FONT,
            "xtick.labelsize": FONT,
            "ytick.labelsize": FONT,
            "legend.fontsize": FONT,
        }
    )
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


#: the widest figure, in inches: at the 80 dpi it is saved at, 9.2 in is 736 px, so it shows
#: unscaled (its text at full size) in the report's column at an 800 px window
MAX_WIDTH = 9.2


def _legend_below(fig, ax, n: int) -> None:
    """The legend under the figure, in rows of up to three entries: it never covers the
    data and never widens the figure (a legend at the right did, and the page scaled the
    whole figure down, text and all)."""
    handles, labels = ax.get_legend_handles_labels()
    # an entry is its swatch (~0.5 in) and its text (~0.09 in a character at 10 pt)
    per_entry = 0.5 + 0.09 * max((len(x) for x in labels), default=1)
    ncol = max(1, min(3, n, int(fig.get_figwidth() // per_entry)))
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)


def grouped_bars(groups: Sequence[str], series: Series, title: str, ylabel: str) -> bytes:
    """One bar per series in each group, with 95% interval error bars. Groups side by side
    while they fit in MAX_WIDTH; more (Layered-VQA's 16 schedules for several models) are
    drawn as horizontal bars, one group under the other, so the figure grows in height and
    its labels stay full size and horizontal."""
    plt = _pyplot()
    n = max(1, len(series))
    wide = max(5.0, 0.6 * len(groups) * n**0.5 + 1.2)
    horizontal = wide > MAX_WIDTH
    size = (MAX_WIDTH * 0.8, max(2.6, 0.2 * len(groups) * n**0.7 + 1.6)) if horizontal else (wide, 3.4)
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        means, err = _errors(values)
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        if horizontal:
            ax.barh(xs, means, width, xerr=err, capsize=2, label=name)
        else:
            ax.bar(xs, means, width, yerr=err, capsize=3, label=name)
    if horizontal:
        ax.set_yticks(range(len(groups)))
        ax.set_yticklabels(groups)
        ax.invert_yaxis()  # the first group on top, as the tables list them
        ax.set_xlabel(ylabel)
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=30 if len(groups) > 6 else 0, ha="right" if len(groups) > 6 else "center")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    ax.set_title(title)
    if len(series) > 1 or any(series):
        _legend_below(fig, ax, len(series))
    return _png(fig)


def level_lines(
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, Value | None]]]], title: str, ylabel: str
) -> bytes:
    """COOCO's Figure 4 as small multiples: one panel per noise area (columns) and
    relatedness condition (rows), each the metric over the noise levels with its 95%
    interval band; shared axes, so panels compare at a glance. The legend needs no
    room in the data: every panel is titled by its condition and area."""
    plt = _pyplot()
    areas = list(panels)
    conditions = list(dict.fromkeys(c for lines in panels.values() for c in lines))
    fig, axes = plt.subplots(
        max(1, len(conditions)),
        max(1, len(areas)),
        sharex=True,
        sharey=True,
        squeeze=False,
        figsize=(2.6 * max(1, len(areas)) + 1.0, 1.7 * max(1, len(conditions)) + 0.8),
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, area in enumerate(areas):
        for i, condition in enumerate(conditions):
            ax = axes[i][j]
            pts = [(x, v) for x, v in panels[area].get(condition, []) if v is not None and v.mean is not None]
            if pts:
                xs = [x for x, _ in pts]
                means, err = _errors([v for _, v in pts])
                color = colors[i % len(colors)]
                ax.plot(xs, means, marker="o", color=color)
                ax.fill_between(
                    xs,
                    [m - e for m, e in zip(means, err[0])],
                    [m + e for m, e in zip(means, err[1])],
                    color=color,
                    alpha=0.2,
                    linewidth=0,
                )
            ax.grid(alpha=0.3)
            if i == 0:
                ax.set_title(f"noise on {area}")
            if j == 0:
                ax.set_ylabel(condition)
            if i == len(conditions) - 1:
                ax.set_xlabel("noise level")
    fig.supylabel(ylabel)
    fig.suptitle(title)
    return _png(fig)


def layer_curves(curves: Mapping[str, tuple[Sequence[str], Sequence[Value | None]]], title: str) -> bytes:
    """Score per layer, one line per curve, the 95% interval shaded when present."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
    for name, (layers, values) in curves.items():
        xs = list(range(len(layers)))
        means, err = _errors(values)
        line = ax.plot(xs, means, marker="o", label=name)[0]
        if any(v is not None and v.ci95 for v in values):
            lo = [m - e for m, e in zip(means, err[0])]
            hi = [m + e for m, e in zip(means, err[1])]
            ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
        ax.set_xticks(xs)
        ax.set_xticklabels(layers, rotation=45, ha="right")
    ax.set_title(title)
    ax.set_ylabel("Pfram")
    ax.set_xlabel("layer")
    ax.grid(alpha=0.3)
    _legend_below(fig, ax, len(curves))
    return _png(fig)
