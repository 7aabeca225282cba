"""The leaderboard: every verified submission in a folder, models ranked per benchmark.

:func:`collect` reads ``*.json`` files in a folder and checks each one with
:func:`lmms_scene.report.submission.read` (schema, then the numbers recomputed from the
submission's own rows, ranges and directions from the registry, the data an official
release); a file that fails is kept aside with its reasons and never ranked. :func:`rank`
orders the models of each benchmark by its headline metric (the registry's first;
direction from the registry, never from a file). Only runs on the same data (the same
dataset fingerprint) and the same headline task are ranked together: other groups are
separate tables. Equal values share a rank. :func:`markdown` and :func:`html` render the
board; every row shows the 95% interval, n and the scorer that computed the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.prompts import environment
from lmms_scene.report.submission import MAX_EMPTY_RATE, read
from lmms_scene.report.tables import cell_text, md_inline, Table, Value


@dataclass
class Entry:
    file: str
    model: str
    model_args: str
    value: float
    ci95: list[float] | None
    n: int | None
    headline: str
    others: dict[str, Any]
    scorer: str
    rank: int = 0


@dataclass
class Group:
    """Submissions that may be ranked together: one benchmark, headline task and dataset."""

    benchmark: str
    task: str
    fingerprint: str
    official_note: str
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Board:
    #: benchmark -> its groups (one per headline task and dataset), ranked
    groups: dict[str, list[Group]] = field(default_factory=dict)
    #: (file, reasons) of every submission that cannot be ranked
    invalid: list[tuple[str, list[str]]] = field(default_factory=list)
    #: number of verified submissions read
    n_valid: int = 0
    #: benchmark -> notes on the ranking (e.g. one model submitted twice)
    notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ranked(self) -> dict[str, list[Entry]]:
        """benchmark -> entries of its largest group (the comparison most readers want)."""
        return {b: max(gs, key=lambda g: len(g.entries)).entries for b, gs in self.groups.items() if gs}


def collect(folder: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float | None = None
            ) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, list[str]]]]:  # fmt: skip
    """(file, submission) for each verified ``*.json`` in ``folder``, and (file, reasons) for the others."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions")
    valid, invalid = [], []
    for path in sorted(folder.glob("*.json")):
        data, problems = read(path, official=official, max_empty_rate=MAX_EMPTY_RATE if max_empty_rate is None else max_empty_rate)
        if problems:
            invalid.append((path.name, problems))
        else:
            valid.append((path.name, data))
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


def rank(submissions: Sequence[tuple[str, Mapping[str, Any]]]) -> Board:
    """Rank the models of each benchmark by its headline metric, per (task, dataset)."""
    board = Board(n_valid=len(submissions))
    groups: dict[tuple[str, str, str], Group] = {}
    for file, sub in submissions:
        for bench_name, b in sub["benchmarks"].items():
            key = (bench_name, b["task"], b["dataset"]["fingerprint"])
            group = groups.setdefault(key, Group(bench_name, b["task"], b["dataset"]["fingerprint"], b["dataset"]["official_note"]))
            head = b["metrics"][b["headline"]]
            group.entries.append(Entry(
                file=file, model=sub["model"]["name"], model_args=sub["model"]["model_args"], value=head["value"],
                ci95=head["ci95"], n=head["n"], headline=b["headline"],
                scorer=_scorer(next(iter(b["provenance"].values()), None)),
                others={k: v for k, v in b["metrics"].items() if k != b["headline"]},
            ))  # fmt: skip
    for (bench_name, _, _), group in sorted(groups.items()):
        hib = benchmarks.get(bench_name).headline[0].higher_is_better
        group.entries.sort(key=lambda e: (-e.value if hib else e.value, e.model, e.file))
        for i, e in enumerate(group.entries):
            # competition ranking: equal values share the better rank
            e.rank = group.entries[i - 1].rank if i and group.entries[i - 1].value == e.value else i + 1
        board.groups.setdefault(bench_name, []).append(group)
        files: dict[tuple[str, str], list[str]] = {}
        for e in group.entries:
            files.setdefault((e.model, e.model_args), []).append(e.file)
        for (model, args), names in files.items():
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


def build(folder: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float | None = None) -> Board:
    valid, invalid = collect(folder, official=official, max_empty_rate=max_empty_rate)
    board = rank(valid)
    board.invalid = invalid
    return board


def _title(bench: str) -> str:
    try:
        return benchmarks.get(bench).title
    except KeyError:
        return bench


def _group_heading(g: Group) -> str:
    head = benchmarks.get(g.benchmark).headline[0]
    direction = "higher is better" if head.higher_is_better else "lower is better"
    return (f"Ranked by {head.title} ({g.task}/{head.name}; {direction}; mean over items, 95% bootstrap interval) "
            f"on data {g.fingerprint[:12]} ({g.official_note})")  # fmt: skip


def tables(board: Board) -> list[tuple[str, Any]]:
    """(benchmark title, Table) for every ranked group: the objects both renderings show."""
    out = []
    for bench, gs in board.groups.items():
        for g in gs:
            other_keys = sorted({k for e in g.entries for k in e.others})
            header = ["Rank", "Model", "Headline [95% CI]", "n", *other_keys, "Scorer", "Submission"]
            rows = [[str(e.rank), e.model + (f" ({e.model_args})" if e.model_args else ""), Value(e.value, e.ci95),
                     "" if e.n is None else str(e.n),
                     *(Value(e.others[k]["value"], e.others[k]["ci95"]) if k in e.others else "" for k in other_keys),
                     e.scorer, e.file] for e in g.entries]  # fmt: skip
            out.append((_title(bench), Table(_group_heading(g), header, rows, key_columns=3)))
    return out


def markdown(board: Board) -> str:
    """The leaderboard as Markdown (every cell escaped: a model name cannot open a heading)."""
    out = ["# lmms-scene leaderboard", f"{board.n_valid} verified submissions, {len(board.invalid)} refused."]
    shown = set()
    for title, table in tables(board):
        if title not in shown:
            out.append(f"## {md_inline(title)}")
            shown.add(title)
        out.append(table.markdown())
    for bench, notes in board.notes.items():
        out += [f"- note ({md_inline(_title(bench))}): {md_inline(n)}" for n in notes]
    if board.invalid:
        out.append("## Refused submissions (not ranked)")
        for file, reasons in board.invalid:
            out.append(f"- {md_inline(file)}: " + "; ".join(md_inline(r) for r in reasons))
    return "\n\n".join(out) + "\n"


def html(board: Board) -> str:
    """The leaderboard as one self-contained HTML page (``templates/report/leaderboard.html.jinja``)."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for title, table in tables(board):
        sections.setdefault(title, []).append({"title": table.title, "header": table.header,
                                               "rows": [[cell_text(c) for c in row] for row in table.rows]})  # fmt: skip
    notes = [f"{_title(b)}: {n}" for b, ns in board.notes.items() for n in ns]
    return environment().get_template("report/leaderboard.html.jinja").render(
        n_valid=board.n_valid, invalid=board.invalid, sections=sections, notes=notes
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
