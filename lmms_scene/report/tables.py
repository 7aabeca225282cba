"""Report tables: one :class:`Table` renders as text (``lmms-scene show``), Markdown and
CSV, and the HTML report's template renders its cells; a benchmark's tables, figures and notes travel together as a :class:`View`.

Every benchmark's results module (``Benchmark.results_module``) builds its ``View`` from
the report dicts the results hold; ``show``, the HTML report, ``report.md`` and the CSV
files all render those same objects, so one number has one value and one interval
everywhere. A cell is text or a :class:`Value` (a mean with the 95% interval and n the
results hold; nothing here computes a statistic). In CSV a column holding values is split
into ``mean``, ``ci_low``, ``ci_high`` and ``n`` columns, so the numbers stay
machine-readable. Text is escaped for the format it lands in: Markdown cells cannot open
a heading or a table row, CSV cells cannot start a spreadsheet formula, HTML is escaped (by
the report's Jinja environment).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_scene import cache
from lmms_scene.report import plots
from lmms_scene.results import short_fingerprint

#: the rendered figures kept per process (a report holds a few dozen, ~30-80 KB each)
PNG_MEMO = 128


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
    #: how many leading columns are the headline (kept in view in the HTML page)
    key_columns: int = 1

    def __post_init__(self) -> None:
        if not self.slug:
            self.slug = slugify(self.title)

    def cells(self) -> list[list[str]]:
        """Every cell as display text (what every renderer prints)."""
        return [[_text(c) for c in row] for row in self.rows]

    def text(self, width: int | None = None) -> str:
        """The table for a terminal: a pipe table under its title, provenance below. With
        ``width``, no line is longer: a wider table is cut into column blocks that each
        repeat the first column (every other cell is printed once), and titles and
        provenance lines are wrapped."""
        cells = self.cells()
        header = [str(h) for h in self.header]
        blocks = _column_blocks(header, cells, width) if width else [list(range(len(header)))]
        out = []
        for k, cols in enumerate(blocks):
            first = cols[1] + 1 if k and len(cols) > 1 else 1
            title = (
                self.title if len(blocks) == 1 else f"{self.title} (columns {first}-{cols[-1] + 1} of {len(header)})"
            )
            lines = [*_wrap(f"## {title}", width), "", _pipe_row(header[i] for i in cols), "|" + "---|" * len(cols)]
            lines += [_pipe_row(row[i] if i < len(row) else "" for i in cols) for row in cells]
            out.append("\n".join(lines))
        if self.provenance:
            out.append("\n".join(line for p in self.provenance for line in _wrap(f"- {p}", width, "  ")))
        return "\n\n".join(out)

    def markdown(self) -> str:
        lines = [
            f"### {md_inline(self.title)}",
            "",
            _pipe_row(md_cell(str(h)) for h in self.header),
            "|" + "---|" * len(self.header),
        ]
        lines += [_pipe_row(md_cell(c) for c in row) for row in self.cells()]
        if self.provenance:
            lines += [""] + [f"- {md_inline(p)}" for p in self.provenance]
        return "\n".join(lines)

    def csv(self) -> str:
        valued = [any(isinstance(r[i], Value) for r in self.rows if i < len(r)) for i in range(len(self.header))]
        head: list[str] = []
        for name, v in zip(self.header, valued):
            head += [f"{name} mean", f"{name} ci_low", f"{name} ci_high", f"{name} n"] if v else [name]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([csv_cell(h) for h in head])
        for row in self.rows:
            out: list[Any] = []
            for i, v in enumerate(valued):
                c = row[i] if i < len(row) else None
                if not v:
                    out.append(csv_cell(_text(c)))
                elif isinstance(c, Value):
                    lo, hi = (c.ci95 or (None, None))[:2]
                    out += ["" if x is None else repr(float(x)) for x in (c.mean, lo, hi)] + [
                        "" if c.n is None else c.n
                    ]
                else:
                    out += [csv_cell(_text(c)), "", "", ""]
            w.writerow(out)
        return buf.getvalue()


def _pipe_row(cells: Any) -> str:
    return "| " + " | ".join(cells) + " |"


def _wrap(text: str, width: int | None, indent: str = "") -> list[str]:
    if not width or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False)


def _column_blocks(header: Sequence[str], cells: Sequence[Sequence[str]], width: int) -> list[list[int]]:
    """Column indices per block so that each block's pipe rows fit in ``width``; block 1
    starts at column 0, the later ones repeat column 0 before their own columns."""
    widths = [max([len(header[i]), *(len(r[i]) for r in cells if i < len(r))]) for i in range(len(header))]
    blocks, current = [], [0]
    used = 4 + widths[0]
    for i in range(1, len(header)):
        if used + 3 + widths[i] > width and len(current) > 1:
            blocks.append(current)
            current, used = [0], 4 + widths[0]
        current.append(i)
        used += 3 + widths[i]
    blocks.append(current)
    return [blocks[0], *([c for c in b] for b in blocks[1:])]


def md_inline(text: str) -> str:
    """``text`` as inline Markdown that cannot start a block: newlines folded (every
    caller puts it after ``### ``, ``- `` or inside a table row, so no heading, list or
    row can begin inside it) and HTML tags and entities made inert."""
    flat = " ".join(str(text).split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_cell(text: str) -> str:
    """``text`` as one Markdown table cell: :func:`md_inline` and ``|`` escaped."""
    return md_inline(text).replace("|", "\\|")


def row_label(row: Mapping[str, Any], fields: Sequence[str]) -> str:
    """A row named by its id fields, for a refusal: ``row image_id='12', condition='high'``."""
    return "row " + ", ".join(f"{f}={str(row.get(f))[:80]!r}" for f in fields)


def csv_cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run: a leading ``= + - @`` (or tab / CR) gets a
    quote in front (the OWASP advice), except for numbers such as ``-0.5``."""
    text = str(text)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?", text):
        return "'" + text
    return text


@dataclass
class Plot:
    """A figure drawn from the same :class:`Value` cells its table shows: ``kind`` names
    the function of :mod:`lmms_scene.report.plots`, ``args`` its arguments."""

    title: str
    kind: str
    args: dict[str, Any]

    def png(self) -> bytes:
        """The figure as PNG bytes, drawn once per process for the same kind, title and
        arguments (a figure of COOCO's small multiples takes about a second to draw on a
        2-core machine; a process writing several reports of the same runs, as a notebook or
        the tests do, draws it once). The arguments are plain values and :class:`Value`
        cells, so their ``repr`` names them exactly; the drawing is deterministic."""
        key = hashlib.sha256(repr((self.kind, self.title, self.args)).encode()).hexdigest()
        return cache.memo("report.png", key, lambda: getattr(plots, self.kind)(**self.args), max_entries=PNG_MEMO)


@dataclass
class Run:
    """One run's provenance block: who ran what on which data, and what scored it."""

    label: str
    tasks: list[str]
    model: str
    model_args: str
    dataset: str
    sources: list[str]
    scorer: list[str] = field(default_factory=list)
    limit: Any = None

    @classmethod
    def of(cls, result: Any, label: str, scorer: Sequence[str] = ()) -> Run:
        """The block of one results file (one task): its model, data fingerprint, source
        and limit, with ``scorer``'s lines."""
        return cls(
            label,
            [result.task],
            result.model,
            result.model_args,
            short_fingerprint(result.fingerprint),
            [str(result.source)],
            list(scorer),
            result.limit,
        )

    def lines(self) -> list[str]:
        limit = f"; --limit {self.limit} (partial run)" if self.limit not in (None, "", "None") else ""
        head = (
            f"{self.label}: model {self.model}, model_args {self.model_args or '-'}{limit}; tasks "
            f"{', '.join(self.tasks)}; data {self.dataset}; source {', '.join(self.sources)}"
        )
        return [head, *self.scorer]


@dataclass
class View:
    """Everything one benchmark shows for a set of results: tables and figures built
    once from the report dicts the results hold, notes, one provenance block per run,
    the results it used and the ones it passed over (with the reason)."""

    benchmark: str
    title: str
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    used: list[Any] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def text(self, width: int | None = None) -> str:
        """What ``lmms-scene show`` prints for this benchmark (no line longer than ``width``)."""
        parts = [t.text(width) for t in self.tables] + ["\n".join(_wrap(n, width, "  ")) for n in self.notes]
        if self.runs:
            lines = [w for run in self.runs for line in run.lines() for w in _wrap(f"- {line}", width, "  ")]
            parts.append("Runs:\n" + "\n".join(lines))
        return "\n\n".join(parts) if parts else f"no {self.title} results to show"


def unscored_note(where: str, n: Any, listed: Any, id_fields: Sequence[str], shown: int = 5) -> str | None:
    """The note a view gives rows recorded unscored: how many, and the first ``shown`` with
    their ids and reasons (a report's ``n_unscored`` / ``unscored``), or None when none."""
    if not isinstance(n, int) or n <= 0:
        return None
    named = []
    for u in (listed if isinstance(listed, Sequence) else [])[:shown]:
        if isinstance(u, Mapping):
            ids = "/".join(str(u.get(k)) for k in id_fields if u.get(k) is not None)
            named.append(f"{ids}: {u.get('reason')}")
    more = f" (and {n - len(named)} more)" if n > len(named) and named else ""
    return (
        f"{where}: {n} rows not scored (left out of every column): "
        + ("; ".join(named) or "reasons not recorded")
        + more
    )


def cell_text(c: Any) -> str:
    """A cell as display text (every renderer prints this)."""
    return _text(c)


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
