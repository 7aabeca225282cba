"""The leaderboard: every valid submission in a folder, models ranked per benchmark.

:func:`collect` reads ``*.json`` files in a folder and checks each one
(:func:`lmms_scene.report.submission.read`); invalid ones are kept aside with their
reasons, never ranked. :func:`rank` orders the models of each benchmark by its headline
metric (the first of the benchmark's headline metrics, on its first task; direction from
``higher_is_better``). Equal values share a rank. Submissions whose headline is on a
different task than the benchmark's most common one are not comparable and are listed
apart; a model submitted twice is ranked twice and noted. :func:`markdown` and :func:`html` render the result; every row shows the 95%
interval, n and the scorer that computed the value.
"""

from __future__ import annotations

import html as _html
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
class Board:
    #: benchmark -> ranked entries
    ranked: dict[str, list[Entry]] = field(default_factory=dict)
    #: benchmark -> (file, why not ranked with the others)
    apart: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: (file, reasons) of every invalid submission
    invalid: list[tuple[str, list[str]]] = field(default_factory=list)
    #: number of valid submissions read
    n_valid: int = 0
    #: benchmark -> notes on the ranking (e.g. one model submitted twice)
    notes: dict[str, list[str]] = field(default_factory=dict)


def collect(folder: str | Path) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, list[str]]]]:
    """(file, submission) for each valid ``*.json`` in ``folder``, and (file, reasons) for the others."""
    from lmms_scene.report.submission import read

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions")
    valid, invalid = [], []
    for path in sorted(folder.glob("*.json")):
        data, problems = read(path)
        if problems:
            invalid.append((path.name, problems))
        else:
            valid.append((path.name, data))
    return valid, invalid


def _scorer(prov: Mapping[str, Any] | None) -> str:
    if not isinstance(prov, Mapping):
        return ""
    if "cesg" in prov and isinstance(prov["cesg"], Mapping):
        p = prov["cesg"]
        return f"cesg (parser {p.get('parser')}, coref {p.get('coref')}, similarity {p.get('similarity_model')})"
    parts = [str(prov.get("scorer", "?"))]
    if prov.get("checkpoint"):
        parts.append(str(prov["checkpoint"]))
    if prov.get("grader"):
        parts.append(f"grader {prov['grader']}")
    return " ".join(parts) + (f" (lmms-scene {prov['lmms_scene_version']})" if prov.get("lmms_scene_version") else "")


def rank(submissions: Sequence[tuple[str, Mapping[str, Any]]]) -> Board:
    """Rank the models of each benchmark by its headline metric."""
    board = Board(n_valid=len(submissions))
    by_bench: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for file, sub in submissions:
        for bench in sub["benchmarks"]:
            by_bench.setdefault(bench, []).append((file, sub))
    for bench in sorted(by_bench):
        items = by_bench[bench]
        # Only numbers on the same task and metric are comparable.
        common = Counter(sub["benchmarks"][bench]["headline"] for _, sub in items).most_common(1)[0][0]
        entries = []
        for file, sub in items:
            b = sub["benchmarks"][bench]
            if b["headline"] != common:
                board.apart.setdefault(bench, []).append(
                    (file, f"headline {b['headline']} is not comparable with {common} (different task or metric)")
                )
                continue
            m = b["metrics"][b["headline"]]
            task = m["task"]
            entries.append(Entry(
                file=file, model=sub["model"]["name"], model_args=sub["model"]["model_args"], value=m["value"],
                ci95=m["ci95"], n=m["n"], headline=common, scorer=_scorer(b["provenance"].get(task)),
                others={k: v for k, v in b["metrics"].items() if k != common},
            ))  # fmt: skip
        hib = all(sub["benchmarks"][bench]["metrics"][common]["higher_is_better"] for _, sub in items
                  if sub["benchmarks"][bench]["headline"] == common)  # fmt: skip
        entries.sort(key=lambda e: (-e.value if hib else e.value, e.model, e.file))
        for i, e in enumerate(entries):
            # competition ranking: equal values share the better rank
            e.rank = entries[i - 1].rank if i and entries[i - 1].value == e.value else i + 1
        board.ranked[bench] = entries
        files: dict[tuple[str, str], list[str]] = {}
        for e in entries:
            files.setdefault((e.model, e.model_args), []).append(e.file)
        for (model, args), names in files.items():
            if len(names) > 1:
                board.notes.setdefault(bench, []).append(
                    f"{model} ({args}) is submitted {len(names)} times ({', '.join(names)}): each is ranked; keep one"
                )
    return board


def build(folder: str | Path) -> Board:
    valid, invalid = collect(folder)
    board = rank(valid)
    board.invalid = invalid
    return board


def _fmt(value: float | None, ci: Sequence[float] | None) -> str:
    from lmms_scene.results import with_interval

    return with_interval(value, ci)


def _title(bench: str) -> str:
    from lmms_scene import benchmarks

    try:
        return benchmarks.get(bench).title
    except KeyError:
        return bench


def _table_rows(entries: Sequence[Entry]) -> tuple[list[str], list[list[str]]]:
    other_keys = sorted({k for e in entries for k in e.others})
    header = ["Rank", "Model", "Headline [95% CI]", "n", *other_keys, "Scorer", "Submission"]
    rows = []
    for e in entries:
        rows.append([
            str(e.rank), e.model + (f" ({e.model_args})" if e.model_args else ""), _fmt(e.value, e.ci95),
            "" if e.n is None else str(e.n),
            *(_fmt(e.others[k]["value"], e.others[k]["ci95"]) if k in e.others else "" for k in other_keys),
            e.scorer, e.file,
        ])  # fmt: skip
    return header, rows


def markdown(board: Board) -> str:
    """The leaderboard as Markdown."""
    from lmms_scene.results import markdown_table

    out = ["# lmms-scene leaderboard", f"{board.n_valid} valid submissions, {len(board.invalid)} invalid."]
    for bench, entries in board.ranked.items():
        out.append(f"## {_title(bench)}")
        if entries:
            out.append(f"Ranked by {entries[0].headline} (mean over items, 95% bootstrap interval).")
            header, rows = _table_rows(entries)
            out.append(markdown_table(header, [[c.replace("|", "\\|") for c in r] for r in rows]))
        for file, why in board.apart.get(bench, []):
            out.append(f"- not ranked: {file}: {why}")
        for note in board.notes.get(bench, []):
            out.append(f"- note: {note}")
    if board.invalid:
        out.append("## Invalid submissions (not ranked)")
        for file, reasons in board.invalid:
            out.append(f"- {file}: " + "; ".join(reasons))
    return "\n\n".join(out) + "\n"


def html(board: Board) -> str:
    """The leaderboard as one self-contained HTML page (no scripts, no external resources)."""
    e = _html.escape
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>lmms-scene leaderboard</title>',
        ("<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}</style></head><body>"),
        "<h1>lmms-scene leaderboard</h1>",
        f"<p>{board.n_valid} valid submissions, {len(board.invalid)} invalid.</p>",
    ]  # fmt: skip
    for bench, entries in board.ranked.items():
        parts.append(f"<h2>{e(_title(bench))}</h2>")
        if entries:
            parts.append(f"<p>Ranked by {e(entries[0].headline)} (mean over items, 95% bootstrap interval).</p>")
            header, rows = _table_rows(entries)
            parts.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>")
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows]
            parts.append("</tbody></table>")
        items = [f"not ranked: {f}: {w}" for f, w in board.apart.get(bench, [])]
        items += [f"note: {n}" for n in board.notes.get(bench, [])]
        if items:
            parts.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>")
    if board.invalid:
        parts.append("<h2>Invalid submissions (not ranked)</h2><ul>")
        parts += [f"<li>{e(f)}: {e('; '.join(r))}</li>" for f, r in board.invalid]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(board: Board, out: str | Path) -> Path:
    """Write ``board`` as Markdown (``.md``) or HTML (``.html``/``.htm``), by the suffix of ``out``."""
    out = Path(out)
    if out.suffix.lower() == ".md":
        text = markdown(board)
    elif out.suffix.lower() in (".html", ".htm"):
        text = html(board)
    else:
        raise ValueError(f"--out: {out} should end in .md or .html (got {out.suffix or 'no suffix'!r})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
