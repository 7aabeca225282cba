"""Report tables: one :class:`Table` renders as Markdown, CSV and HTML.

A cell is text or a :class:`Value` (a mean with the 95% interval and n the results hold;
nothing here computes a statistic). In CSV a column holding values is split into
``mean``, ``ci_low``, ``ci_high`` and ``n`` columns, so the numbers stay machine-readable.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Value:
    """A number as the results hold it: mean, 95% interval (or None) and n (or None)."""

    mean: float | None
    ci95: Sequence[float] | None = None
    n: int | None = None
    #: multiply for display (SNUS-style x100 tables); CSV keeps the raw numbers
    scale: float = 1.0

    def text(self) -> str:
        if self.mean is None:
            return ""
        s, d = self.scale, (1 if self.scale != 1 else 3)
        out = f"{s * self.mean:.{d + 1 if s != 1 else d}f}"
        if self.ci95:
            out += f" [{s * self.ci95[0]:.{d}f}, {s * self.ci95[1]:.{d}f}]"
        if self.n is not None:
            out += f" (n={self.n})"
        return out


def value_of(cell: Mapping[str, Any] | None, metric: str, n_key: str = "n") -> Value | None:
    """The ``metric`` of a breakdown cell (``{metric, ci95: {metric: [lo, hi]}, n}``), or None."""
    if not isinstance(cell, Mapping) or cell.get(metric) is None:
        return None
    ci = cell.get("ci95")
    interval = ci.get(metric) if isinstance(ci, Mapping) else (ci if isinstance(ci, (list, tuple)) else None)
    n = cell.get(n_key)
    return Value(float(cell[metric]), list(interval) if interval else None, n if isinstance(n, int) else None)


@dataclass
class Table:
    """A titled table with the provenance lines that say what produced its numbers."""

    title: str
    header: list[str]
    rows: list[list[Any]]
    #: which model(s), parser, grader, thresholds, intervals and source files
    provenance: list[str] = field(default_factory=list)
    #: the file name stem of its CSV export
    slug: str = ""

    def __post_init__(self) -> None:
        if not self.slug:
            self.slug = slugify(self.title)

    def markdown(self) -> str:
        def fmt(c: Any) -> str:
            return _text(c).replace("|", "\\|")

        lines = [f"### {self.title}", "", "| " + " | ".join(map(fmt, self.header)) + " |",
                 "|" + "---|" * len(self.header)]  # fmt: skip
        lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in self.rows]
        if self.provenance:
            lines += [""] + [f"- {p}" for p in self.provenance]
        return "\n".join(lines)

    def csv(self) -> str:
        valued = [any(isinstance(r[i], Value) for r in self.rows if i < len(r)) for i in range(len(self.header))]
        head: list[str] = []
        for name, v in zip(self.header, valued):
            head += [f"{name} mean", f"{name} ci_low", f"{name} ci_high", f"{name} n"] if v else [name]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(head)
        for row in self.rows:
            out: list[Any] = []
            for i, v in enumerate(valued):
                c = row[i] if i < len(row) else None
                if not v:
                    out.append(_text(c))
                elif isinstance(c, Value):
                    lo, hi = (c.ci95 or (None, None))[:2]
                    out += ["" if x is None else repr(float(x)) for x in (c.mean, lo, hi)] + ["" if c.n is None else c.n]
                else:
                    out += [_text(c), "", "", ""]
            w.writerow(out)
        return buf.getvalue()

    def html(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(str(h))}</th>" for h in self.header)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(_text(c))}</td>" for c in row) + "</tr>" for row in self.rows
        )
        prov = "".join(f"<li>{e(p)}</li>" for p in self.provenance)
        return (
            f'<figure class="table" id="t-{e(self.slug)}"><figcaption>{e(self.title)}</figcaption>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            + (f'<ul class="provenance">{prov}</ul>' if prov else "")
            + "</figure>"
        )


def _text(c: Any) -> str:
    if c is None:
        return ""
    if isinstance(c, Value):
        return c.text()
    if isinstance(c, float):
        return f"{c:.3f}"
    return str(c)


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "table"


def parse_markdown(text: str) -> tuple[list[tuple[str, list[str], list[list[str]]]], list[str]]:
    """The pipe tables of a Markdown text as (title, header, rows), titled by the heading or
    line above each, and every other non-empty line (the notes: provenance, counts)."""
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    notes: list[str] = []
    last_title = ""
    lines = text.splitlines()
    i = 0

    def cells(line: str) -> list[str]:
        body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]

    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1].strip()):
            header = cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            tables.append((last_title or f"table {len(tables) + 1}", header, rows))
            last_title = ""
            continue
        if line:
            title = line.lstrip("#").strip()
            if line.startswith("#") or (i + 2 < len(lines) and lines[i + 2].strip().startswith("|")):
                last_title = title
            else:
                notes.append(title)
        i += 1
    return tables, notes
