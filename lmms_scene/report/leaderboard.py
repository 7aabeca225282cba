"""The leaderboard: every verified submission in a folder, models ranked per benchmark.

:func:`collect` reads the regular ``*.json`` files directly inside a folder (a link, a FIFO
or a device is refused by its name, never opened) and checks each one with
:func:`lmms_scene.report.submission.read_checked`: the schema, the data a fingerprint the
registry or the operator (``--official``) vouches for, every row once and of its type,
every score recomputed from the row's output where no weights are needed, the headline
recomputed from the rows. A file that fails is kept aside with its reasons (and, for data
nobody vouched for, its fingerprint and the ``--official`` file that would vouch for it),
never ranked; the board is written for the rest. :func:`rank` orders the models of each
benchmark by the metric its registry entry names (:attr:`Benchmark.ranking_metric`, with
its direction), per headline task and dataset fingerprint; equal values share a rank.
:func:`markdown` and :func:`html` render the board: names NFKC-normalised with invisible
characters removed, every cell escaped, and what the board checked kept apart from what the
submitter says (the provenance column is labelled as the submitter's).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.prompts import environment
from lmms_scene.report.submission import MAX_EMPTY_RATE, read_checked
from lmms_scene.report.tables import Table, Value, cell_text, md_inline

#: how long a shown name or reason may be
MAX_SHOWN = 300


def shown(text: Any, limit: int = MAX_SHOWN) -> str:
    """Text from a submission as the board shows it: NFKC-normalised, with every invisible
    or control character (zero-width spaces, bidi controls, NUL, ESC, lone surrogates)
    removed, whitespace folded, at most ``limit`` characters. Two names that look the
    same are then the same name."""
    text = unicodedata.normalize("NFKC", str(text).encode("utf-8", "replace").decode("utf-8"))
    text = "".join(" " if ch.isspace() else ch for ch in text if ch.isspace() or unicodedata.category(ch)[0] != "C")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~:])")


def md_text(text: Any) -> str:
    """:func:`shown` text as inert Markdown: HTML made inert, and every character that can
    open a link, an image, emphasis or code escaped (``[x](javascript:...)`` stays text)."""
    return _MD_SPECIAL.sub(r"\\\1", md_inline(shown(text)))


@dataclass
class Entry:
    file: str
    model: str
    model_args: str
    value: float
    ci95: list[float] | None
    n: int | None
    metric: str
    others: dict[str, Any]
    #: the submitter's own provenance record, in words (shown as theirs, never as checked)
    scorer: str
    #: what the leaderboard itself re-derived from the outputs (and what it could not)
    checked: str = ""
    rank: int = 0


@dataclass
class Group:
    """Submissions that may be ranked together: one benchmark, headline task and dataset."""

    benchmark: str
    task: str
    fingerprint: str
    #: who vouches for the data: "registry" or "--official" (never the file)
    vouched_by: str
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Refusal:
    file: str
    reasons: list[str]
    #: benchmark -> the ``--official`` file content that would vouch for its data
    hints: dict[str, str] = field(default_factory=dict)

    def __iter__(self):  # (file, reasons), as before
        return iter((self.file, self.reasons))


@dataclass
class Board:
    #: benchmark -> its groups (one per headline task and dataset), ranked
    groups: dict[str, list[Group]] = field(default_factory=dict)
    #: every submission that cannot be ranked, with its reasons
    invalid: list[Refusal] = field(default_factory=list)
    #: number of verified submissions read
    n_valid: int = 0
    #: benchmark -> notes on the ranking (e.g. one model submitted twice)
    notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ranked(self) -> dict[str, list[Entry]]:
        """benchmark -> entries of its largest group (the comparison most readers want)."""
        return {b: max(gs, key=lambda g: len(g.entries)).entries for b, gs in self.groups.items() if gs}


def _candidates(folder: Path) -> list[str]:
    """The names in ``folder`` ending in ``.json`` (not following anything)."""
    with os.scandir(folder) as it:
        return sorted(e.name for e in it if e.name.lower().endswith(".json"))


def collect(
    folder: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float | None = None
) -> tuple[list[tuple[str, dict[str, Any], dict[str, Any]]], list[Refusal]]:
    """(file, submission, findings) for each verified ``*.json`` in ``folder``, and a
    :class:`Refusal` for each of the others (one bad file costs its own row, nothing more)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions")
    valid, invalid = [], []
    rate = MAX_EMPTY_RATE if max_empty_rate is None else max_empty_rate
    for name in _candidates(folder):
        try:
            data, problems, findings = read_checked(folder / name, official=official, max_empty_rate=rate)
        except Exception as exc:  # noqa: BLE001 - a file this check did not foresee still costs one row
            data, problems, findings = None, [f"cannot be checked ({type(exc).__name__}: {str(exc)[:200]})"], {}
        if problems:
            hints = {b: f["official_hint"] for b, f in findings.items() if f.get("official_hint")}
            invalid.append(Refusal(name, problems, hints))
        else:
            valid.append((name, data, findings))
    return valid, invalid


def _scorer(prov: Mapping[str, Any] | None) -> str:
    if not isinstance(prov, Mapping):
        return ""
    if isinstance(prov.get("cesg"), Mapping):
        p = prov["cesg"]
        return f"cesg (parser {p.get('parser')}, coref {p.get('coref')}, similarity {p.get('similarity_model')})"
    parts = [str(prov.get("scorer", "?"))]
    if prov.get("checkpoint") or prov.get("clip_model"):
        parts.append(str(prov.get("checkpoint") or prov.get("clip_model")))
    if prov.get("grader"):
        parts.append(f"grader {prov['grader']}")
    return " ".join(parts) + (f" (lmms-scene {prov['lmms_scene_version']})" if prov.get("lmms_scene_version") else "")


def rank(submissions: Sequence[tuple[Any, ...]]) -> Board:
    """Rank the models of each benchmark by its registry's ranking metric, per (task, dataset).
    ``submissions``: ``(file, submission[, findings])``; without findings (a submission
    not checked here) nothing is said to be re-derived and the data is "unchecked"."""
    board = Board(n_valid=len(submissions))
    groups: dict[tuple[str, str, str], Group] = {}
    for file, sub, *rest in submissions:
        findings = rest[0] if rest else {}
        for bench_name, b in sub["benchmarks"].items():
            bench = benchmarks.get(bench_name)
            found = findings.get(bench_name) or {}
            fp = found.get("fingerprint") or b["dataset"]["fingerprint"]
            key = (bench_name, b["task"], fp)
            group = groups.setdefault(key, Group(bench_name, b["task"], fp, found.get("vouched_by") or "unchecked"))
            metric = bench.ranking_metric.name
            head = b["metrics"][metric]
            group.entries.append(
                Entry(
                    file=shown(file),
                    model=shown(sub["model"]["name"]),
                    model_args=shown(sub["model"]["model_args"]),
                    value=head["value"],
                    ci95=head["ci95"],
                    n=head["n"],
                    metric=metric,
                    scorer=shown(_scorer(next(iter(b["provenance"].values()), None))),
                    checked="; ".join(found.get("rederived") or []) or "nothing re-derived (not checked by this board)",
                    others={k: v for k, v in b["metrics"].items() if k != metric},
                )
            )
    for (bench_name, _, _), group in sorted(groups.items()):
        hib = benchmarks.get(bench_name).ranking_metric.higher_is_better
        group.entries.sort(key=lambda e: (-e.value if hib else e.value, e.model, e.file))
        for i, e in enumerate(group.entries):
            # competition ranking: equal values share the better rank
            e.rank = group.entries[i - 1].rank if i and group.entries[i - 1].value == e.value else i + 1
        board.groups.setdefault(bench_name, []).append(group)
        files: dict[tuple[str, str], list[str]] = {}
        label: dict[tuple[str, str], tuple[str, str]] = {}
        for e in group.entries:
            # names compared as shown (NFKC, invisible characters removed, case folded):
            # a zero-width space does not make another model
            key = (e.model.casefold(), e.model_args.casefold())
            files.setdefault(key, []).append(e.file)
            label.setdefault(key, (e.model, e.model_args))
        for key, names in files.items():
            model, args = label[key]
            if len(names) > 1:
                board.notes.setdefault(bench_name, []).append(
                    f"{model} ({args}) is submitted {len(names)} times ({', '.join(names)}): each is ranked; keep one"
                )
    for bench_name, gs in board.groups.items():
        if len(gs) > 1:
            board.notes.setdefault(bench_name, []).append(
                f"{len(gs)} groups of submissions on different data or headline tasks: each is ranked on its own, never together"
            )
    return board


def build(
    folder: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float | None = None
) -> Board:
    valid, invalid = collect(folder, official=official, max_empty_rate=max_empty_rate)
    board = rank(valid)
    board.invalid = invalid
    return board


def _title(bench: str) -> str:
    try:
        return benchmarks.get(bench).title
    except KeyError:
        return bench


VOUCHED = {
    "registry": "vouched for by lmms-scene's registry",
    "--official": "vouched for by this board's --official list",
    "unchecked": "not checked by this board",
}


def _group_heading(g: Group) -> str:
    bench = benchmarks.get(g.benchmark)
    head = bench.ranking_metric
    direction = "higher is better" if head.higher_is_better else "lower is better"
    beside = ", ".join(m.name for m in bench.headline if m.name != head.name)
    return (
        f"Ranked by {head.title} ({g.task}/{head.name}; {direction}; mean over items, 95% bootstrap interval; "
        f"beside it: {beside}) on data {g.fingerprint[:12]} ({VOUCHED.get(g.vouched_by, g.vouched_by)})"
    )


def tables(board: Board) -> list[tuple[str, Any]]:
    """(benchmark title, Table) for every ranked group: the objects both renderings show."""
    out = []
    for bench, gs in board.groups.items():
        for g in gs:
            other_keys = [m.name for m in benchmarks.get(bench).headline if any(m.name in e.others for e in g.entries)]
            header = [
                "Rank",
                "Model",
                f"{g.entries[0].metric} [95% CI]" if g.entries else "Value [95% CI]",
                "n",
                *other_keys,
                "Re-derived by this board",
                "Provenance (the submitter's, not checked)",
                "Submission",
            ]
            rows = [
                [
                    str(e.rank),
                    e.model + (f" ({e.model_args})" if e.model_args else ""),
                    Value(e.value, e.ci95),
                    "" if e.n is None else str(e.n),
                    *(Value(e.others[k]["value"], e.others[k]["ci95"]) if k in e.others else "" for k in other_keys),
                    e.checked,
                    e.scorer,
                    e.file,
                ]
                for e in g.entries
            ]
            out.append((_title(bench), Table(_group_heading(g), header, rows, key_columns=3)))
    return out


def _refusal_lines(r: Refusal) -> list[str]:
    lines = [shown(x) for x in r.reasons]
    lines += [
        f"to vouch for its {_title(b)} data, pass --official FILE with FILE holding {hint}"
        for b, hint in r.hints.items()
    ]
    return lines


def markdown(board: Board) -> str:
    """The leaderboard as Markdown (every cell escaped: a name cannot open a heading or a link)."""
    out = ["# lmms-scene leaderboard", f"{board.n_valid} verified submissions, {len(board.invalid)} refused."]
    shown_titles = set()
    for title, table in tables(board):
        if title not in shown_titles:
            out.append(f"## {md_text(title)}")
            shown_titles.add(title)
        safe = Table(
            md_text(table.title),
            [md_text(h) for h in table.header],
            [[c if isinstance(c, Value) else md_text(cell_text(c)) for c in row] for row in table.rows],
            key_columns=table.key_columns,
        )
        out.append(_md_table(safe))
    for bench, notes in board.notes.items():
        out += [f"- note ({md_text(_title(bench))}): {md_text(n)}" for n in notes]
    if board.invalid:
        out.append("## Refused submissions (not ranked)")
        for r in board.invalid:
            out.append(f"- {md_text(r.file)}: " + "; ".join(md_text(x) for x in _refusal_lines(r)))
    return "\n\n".join(out) + "\n"


def _md_table(table: Table) -> str:
    # cells are escaped already: join them as one Markdown table
    lines = [table.title, "", "| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(cell_text(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def html(board: Board) -> str:
    """The leaderboard as one self-contained HTML page (``templates/report/leaderboard.html.jinja``;
    Jinja escapes every cell)."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for title, table in tables(board):
        sections.setdefault(title, []).append(
            {
                "title": table.title,
                "header": table.header,
                "rows": [[shown(cell_text(c), 10 * MAX_SHOWN) for c in row] for row in table.rows],
            }
        )
    notes = [shown(f"{_title(b)}: {n}", 10 * MAX_SHOWN) for b, ns in board.notes.items() for n in ns]
    invalid = [(shown(r.file), _refusal_lines(r)) for r in board.invalid]
    return (
        environment()
        .get_template("report/leaderboard.html.jinja")
        .render(n_valid=board.n_valid, invalid=invalid, sections=sections, notes=notes)
    )


def write(board: Board, out: str | Path) -> Path:
    """Write ``board`` as Markdown (``.md``) or HTML (``.html``/``.htm``), by the suffix of ``out``."""
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out: {out} is a folder; give a file name ending in .md or .html")
    if out.suffix.lower() == ".md":
        text = markdown(board)
    elif out.suffix.lower() in (".html", ".htm"):
        text = html(board)
    else:
        raise ValueError(f"--out: {out} should end in .md or .html (got {out.suffix or 'no suffix'!r})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
