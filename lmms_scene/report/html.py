"""The HTML report: one self-contained page comparing lmms-eval results of several models.

:func:`build_report` reads results folders or files (one per model; the ``scene_blind``
baseline is a model like any other), Pfram score files (``lmms-scene pfram score
--output``) optionally, and writes:

- ``out`` (e.g. ``report.html``): one HTML file that needs no network: CSS inline,
  plots embedded as base64 PNG, no external URL, no script (``templates/report/page.html.jinja``);
- ``report.md`` beside it: every table as Markdown, with its provenance lines;
- ``tables/*.csv`` beside it: every table as CSV (intervals in their own columns).

Every benchmark's section is its registry results module's :class:`~lmms_scene.report.tables.View`,
the same objects ``lmms-scene show`` prints: built once from the report dicts the
results hold, never recomputed here. Results of one model on two datasets are two rows,
labelled by dataset, and the page says so at the top.

Bad input never stops the report: a corrupted JSON, a results file from another
harness version, a task without the report dict its benchmark writes, a second run of
the same model on the same task and data, a model missing a task the others have: each
is listed (path and reason) in the page, in ``report.md`` and in :attr:`ReportInfo.skipped`.
A file at ``out`` (or ``report.md``, ``tables/``) that an earlier report did not write
is never overwritten unless ``overwrite=True``.
"""

from __future__ import annotations

import base64
import importlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmms_scene
from lmms_scene import benchmarks
from lmms_scene import results as results_lib
from lmms_scene.prompts import environment
from lmms_scene.report.tables import Plot, Run, Table, Value, View, cell_text, md_inline, slugify
from lmms_scene.results import label_runs

#: the harness release whose results files this report reads (a results file naming
#: another release is skipped; a git install writes ``main@<hash>`` and is read)
HARNESS_SERIES = "0.7."
#: what marks a file as written by this report (so a rerun may replace it)
GENERATOR = "lmms-scene report"


@dataclass
class ReportInfo:
    """What :func:`build_report` wrote and what it left out."""

    out: Path
    markdown: Path
    csv: list[Path]
    models: list[str]
    benchmarks: list[str]
    n_tables: int
    n_plots: int
    #: (path or model, reason) for everything not in the report
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: notes on datasets mixed in the results (shown at the top of the page)
    mixture: list[str] = field(default_factory=list)
    #: the files an earlier report wrote that this one replaced
    replaced: list[Path] = field(default_factory=list)
    #: the views the page and report.md render (the same objects ``show`` prints)
    views: list[View] = field(default_factory=list)


# -- reading -------------------------------------------------------------------------------


def _results_files(paths: Sequence[Path], skipped: list[tuple[str, str]]) -> list[Path]:
    """The files to load: results JSONs written by the harness series we read (others
    skipped with the reason), plus folders holding only samples files."""
    out: list[Path] = []
    for p in paths:
        files = sorted(p.rglob("*_results.json")) if p.is_dir() else [p]
        if p.is_dir() and not files:
            out.append(p)  # results.load reports it (samples only, or nothing)
            continue
        for f in files:
            if f.is_file() and f.name.endswith(".json"):
                version = _harness_version(f)
                if version and re.match(r"^\d+\.\d+", version) and not version.startswith(HARNESS_SERIES):
                    skipped.append(
                        (
                            str(f),
                            f"written by lmms-eval {version}; this report reads lmms-eval "
                            f"{HARNESS_SERIES}x results (re-run with the tested harness)",
                        )
                    )
                    continue
            out.append(f)
    return out


def _harness_version(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # results.load says why
    value = data.get("lmms_eval_version") if isinstance(data, dict) else None
    return str(value) if value else None


def _run_key(source: Path) -> str:
    """Sort key of a run: the harness's ``<date>_results.json`` prefix, else the path."""
    return source.name.split("_results.json")[0]


def _select(results: Sequence[Any], skipped: list[tuple[str, str]]) -> list[Any]:
    """lmms-scene task results, one per (model, dataset, task): the newest run wins, the
    others are listed as skipped."""
    keep: dict[tuple[str, str, str | None, str], Any] = {}
    for r in sorted(results, key=lambda r: (_run_key(r.source), str(r.source)), reverse=True):
        if r.benchmark is None:
            skipped.append((str(r.source), f"task {r.task}: not an lmms-scene task"))
            continue
        if r.source.suffix == ".jsonl":
            skipped.append(
                (
                    str(r.source),
                    f"task {r.task}: a samples file without its results JSON; the report "
                    "reads the report dicts results JSONs hold",
                )
            )
            continue
        key = (r.label, r.model_args, r.fingerprint, r.task)
        if key in keep:
            newer = keep[key].source
            why = "the same file was given twice" if newer == r.source else f"the newer run {newer} is shown"
            skipped.append((str(r.source), f"second run of model {r.label} on task {r.task} (same data): {why}"))
            continue
        keep[key] = r
    return sorted(keep.values(), key=lambda r: (r.label, r.task))


def _missing_tasks(selected: Sequence[Any], labels: Mapping[int, str], skipped: list[tuple[str, str]]) -> None:
    by_bench: dict[str, dict[str, set[str]]] = {}
    sources: dict[str, str] = {}
    for r in selected:
        if r.config.get("group"):
            continue
        label = labels[id(r)]
        by_bench.setdefault(r.benchmark, {}).setdefault(label, set()).add(r.task)
        sources.setdefault(label, str(r.source.parent))
    for _bench, models in by_bench.items():
        every = set().union(*models.values())
        for model, tasks in models.items():
            for task in sorted(every - tasks):
                others = sorted(m for m, t in models.items() if task in t)
                skipped.append(
                    (
                        sources[model],
                        f"model {model} has no {task} results ({', '.join(others)} "
                        f"do); its entries for {task} are blank",
                    )
                )


# -- Pfram ------------------------------------------------------------------------------------


def _thresholds(sc: Mapping[str, Any]) -> str:
    th = sc.get("thresholds") or {}
    return ", ".join(f"{k} {v}" for k, v in th.items()) if th else "none"


def pfram_view(files: Sequence[Path]) -> View:
    """Pfram per layer and its summaries, from ``lmms-scene pfram score --output`` files."""
    view = View("pfram", "Pfram")
    curves: dict[str, tuple[list[str], list[Value | None]]] = {}
    summary: list[list[Any]] = []
    for f in files:
        try:
            data = json.loads(Path(f).read_text(encoding="utf-8"))
            rows = data["rows"]
            if not isinstance(rows, list):
                raise TypeError("'rows' is not a list")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            view.skipped.append((str(f), f"not a 'pfram score' output ({type(exc).__name__}: {exc})"))
            continue
        pv = data.get("provenance") or {}
        ckpt = str(pv.get("checkpoint") or Path(f).stem)
        name = ckpt.rstrip("/").rsplit("/", 1)[-1]
        view.runs.append(
            Run(
                name,
                ["pfram"],
                str(data.get("computed_by", "?")),
                "",
                f"gold {pv.get('gold', '?')}",
                [str(f)],
                [f"checkpoint {ckpt}; thresholds: {_thresholds(pv)}"],
            )
        )
        for i, row in enumerate(rows):
            layers = row.get("layers") if isinstance(row, Mapping) else None
            if not isinstance(layers, Mapping) or not layers:
                view.skipped.append((str(f), f"row {i}: no 'layers' scores"))
                continue
            ci = row.get("ci95") or {}
            label = f"{name} {row.get('phi')} k={row.get('k')} ties={row.get('ties')}"
            names = list(layers)
            curves[label] = (names, [Value(float(layers[x]), ci.get(x)) for x in names])
            summary.append([label, *(row.get(k) for k in ("input", "mean", "max")), row.get("skipped_anchors")])
    if not curves:
        view.notes.append(
            "No Pfram scores given (pass --pfram FILE, the output of `lmms-scene pfram score --output FILE`)."
        )
        return view
    layers = list(dict.fromkeys(x for names, _ in curves.values() for x in names))
    rows = [[x, *(dict(zip(*c)).get(x) for c in curves.values())] for x in layers]
    view.tables.append(Table("Pfram per layer", ["layer", *curves], rows, slug="pfram-layers"))
    view.tables.append(
        Table(
            "Pfram summaries (input layer, mean and max over the LLM layers)",
            ["setting", "Pfram_input", "Pfram_mean", "Pfram_max", "undefined anchors"],
            summary,
            slug="pfram-summary",
        )
    )
    view.plots.append(
        Plot(
            "Pfram per layer (95% interval shaded when scored with --bootstrap)",
            "layer_curves",
            {"curves": curves, "title": "Pfram per layer"},
        )
    )
    return view


# -- building the views -------------------------------------------------------------------


def views(results: Sequence[Any]) -> tuple[list[View], list[str]]:
    """Every benchmark's view of ``results`` (registry order) and the notes that state a
    mixture of datasets; the one place ``show`` and the report build what they render."""
    labels, mixture = label_runs(results)
    out = []
    for bench in benchmarks.BENCHMARKS:
        mine = [r for r in results if r.benchmark == bench.name]
        if mine:
            view = bench.results().view(mine, labels)
            source = blind_prior_source(bench) if any(r.model == "scene_blind" for r in mine) else None
            if source:
                view.notes.append(
                    f"scene_blind (the blind baseline) never looks at an image; its {bench.title} answers are {source}."
                )
            out.append(view)
    return out, mixture


def blind_prior_source(bench: benchmarks.Benchmark) -> str | None:
    """Where ``scene_blind``'s answers for ``bench`` come from (its prior module's
    ``PRIOR_SOURCE``), or None when the module does not say."""
    try:
        module = importlib.import_module(bench.blind_prior.partition(":")[0])
    except ImportError:
        return None
    source = getattr(module, "PRIOR_SOURCE", None)
    return source if isinstance(source, str) else None


# -- writing ----------------------------------------------------------------------------------


#: the widest a row label column gets (in ``ch``); a longer label wraps inside it
LABEL_CH = 22.0
#: key columns whose right edge lies within this many ``ch`` stay in view at any window
#: width (800 px holds ~100 ch of table text: the rest of the table keeps room to scroll)
STICKY_CH = 44.0
#: the ones within this many ``ch`` stay in view in a window of at least WIDE_PX
STICKY_WIDE_CH = 96.0
WIDE_PX = 1100
#: the interval and n under a mean are set smaller (``.ci`` in the page's CSS)
CI_SCALE = 0.85


def _parts(c: Any) -> tuple[str, str]:
    """A cell as (first line, second line): a value's mean, then its interval and n."""
    text = cell_text(c)
    if isinstance(c, Value) and " " in text:
        mean, rest = text.split(" ", 1)
        return mean, rest
    return text, ""


def _width(table: Table, i: int) -> float:
    """Column ``i``'s width in ``ch``: its longest header word (headers wrap) or cell line
    (a value's second line is set smaller); a row label is capped at LABEL_CH and wraps."""
    words = str(table.header[i]).split() or [""]
    lines = [len(w) for w in words]
    for row in table.rows:
        if i < len(row):
            first, second = _parts(row[i])
            lines += [len(first), CI_SCALE * len(second)]
    width = max(lines) * 1.05 + 2.0
    return min(width, LABEL_CH) if i == 0 else width


def _key_styles(table: Table) -> list[tuple[str, str]]:
    """(classes, inline style) of a table's key columns (the label and the headline), which
    come first: each gets a fixed width, and is sticky at the summed width of the ones
    before it while the rest of the table scrolls, as far as the window leaves room to
    scroll: within STICKY_CH at any width (``stick``), within STICKY_WIDE_CH from WIDE_PX up
    (``stick-wide``); a key column beyond that scrolls with the table, first in line."""
    out, left = [], 0.0
    for i in range(min(table.key_columns, len(table.header))):
        width = _width(table, i)
        tier = (
            "stick" if left + width <= STICKY_CH or i == 0 else "stick-wide" if left + width <= STICKY_WIDE_CH else ""
        )
        out.append(
            (
                " ".join(["key", "headline", *([tier] if tier else [])]),
                f"left:{left:.1f}ch;min-width:{width:.1f}ch;max-width:{width:.1f}ch",
            )
        )
        left += width
    return out


def _cell_context(table: Table) -> list[list[dict[str, str]]]:
    keys = _key_styles(table)
    rows = []
    for row in table.rows:
        cells = []
        for i, c in enumerate(row):
            classes = ["num"] if isinstance(c, (Value, int, float)) and not isinstance(c, bool) else []
            if i < len(keys):
                classes.append(keys[i][0])
            first, second = _parts(c)
            cells.append(
                {
                    "text": first,
                    "ci": second,
                    "classes": " ".join(classes),
                    "style": keys[i][1] if i < len(keys) else "",
                }
            )
        rows.append(cells)
    return rows


def page(views_: Sequence[View], mixture: Sequence[str], skipped: Sequence[tuple[str, str]], title: str) -> str:
    """The report page (``templates/report/page.html.jinja``, escaped by the environment)."""
    sections = []
    for v in views_:
        tables = [
            {
                "title": t.title,
                "slug": t.slug,
                "header": t.header,
                "key_cols": _key_styles(t),
                "display": _cell_context(t),
                "provenance": t.provenance,
            }
            for t in v.tables
        ]
        figures = [{"title": p.title, "data": base64.b64encode(p.png()).decode("ascii")} for p in v.plots]
        sections.append(
            {
                "benchmark": v.benchmark,
                "title": v.title,
                "notes": v.notes,
                "tables": tables,
                "figures": figures,
                "runs": [run.lines() for run in v.runs],
            }
        )
    return (
        environment()
        .get_template("report/page.html.jinja")
        .render(
            title=title,
            generator=GENERATOR,
            version=lmms_scene.__version__,
            sections=sections,
            mixture=list(mixture),
            skipped=list(skipped),
        )
    )


def markdown(views_: Sequence[View], mixture: Sequence[str], skipped: Sequence[tuple[str, str]], title: str) -> str:
    out = [f"<!-- {GENERATOR} -->", f"# {md_inline(title)}", ""]
    if mixture:
        out += ["**Several datasets:**", "", *(f"- {md_inline(m)}" for m in mixture), ""]
    for v in views_:
        out += ["", f"## {md_inline(v.title)}", ""]
        out += [f"{md_inline(n)}\n" for n in v.notes]
        out += [t.markdown() + "\n" for t in v.tables]
        if v.runs:
            out += ["Runs:", "", *(f"- {md_inline(line)}" for run in v.runs for line in run.lines()), ""]
    out += ["", "## Skipped", ""] + ([f"- `{md_inline(p)}`: {md_inline(why)}" for p, why in skipped] or ["nothing"])
    return "\n".join(out) + "\n"


def _ours(path: Path) -> bool:
    """Whether ``path`` was written by this report (or does not exist)."""
    if not path.exists():
        return True
    if path.is_dir():
        return (path / ".lmms-scene-report").is_file()
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:2000]
    except OSError:
        return False
    return GENERATOR in head


def build_report(
    paths: str | Path | Iterable[str | Path],
    out: str | Path,
    pfram: Iterable[str | Path] | None = None,
    *,
    title: str = "lmms-scene report",
    progress: bool = False,
    overwrite: bool = False,
) -> ReportInfo:
    """Write the report of ``paths`` (results folders or files, one per model) to ``out``
    (HTML), with ``report.md`` and ``tables/*.csv`` beside it; see the module docstring.

    Raises ``ValueError`` when nothing at all could be reported (no lmms-scene results and
    no Pfram scores), or when ``out`` (or ``report.md``, ``tables/``) exists and was not
    written by an lmms-scene report (pass ``overwrite=True`` to replace it); anything less
    is listed in :attr:`ReportInfo.skipped`.
    """
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    pfram_files = [Path(p) for p in (pfram or [])]
    out = Path(out)
    if not paths and not pfram_files:
        raise ValueError("paths: give at least one results folder or file (or --pfram score files)")
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"out: expected an .html file name, got {str(out)!r}")
    if out.is_dir():
        raise ValueError(f"out: {out} is a folder; give the .html file to write (report.md and tables/ go beside it)")
    md, table_dir = out.with_name("report.md"), out.with_name("tables")
    foreign = [p for p in (out, md, table_dir) if not _ours(p)]
    if foreign and not overwrite:
        raise ValueError(
            f"{', '.join(map(str, foreign))} exist(s) and were not written by an lmms-scene report; "
            "choose another --out or pass --overwrite"
        )
    replaced = [p for p in (out, md) if p.exists()]
    skipped: list[tuple[str, str]] = []
    steps = tqdm(total=4, desc="lmms-scene report", disable=not progress, unit="step")
    loaded = results_lib.load(_results_files(paths, skipped)) if paths else results_lib.Loaded()
    skipped += loaded.skipped
    selected = _select(loaded.results, skipped)
    labels, _ = results_lib.label_runs(selected)
    _missing_tasks(selected, labels, skipped)
    steps.update(1)
    built, mixture = views(selected)
    if pfram_files:
        built.append(pfram_view(pfram_files))
    for v in built:
        skipped += v.skipped
    shown = [v for v in built if v.tables or v.plots]
    steps.update(1)
    if not shown:
        steps.close()
        reasons = "; ".join(f"{p}: {why}" for p, why in skipped[:10]) or "no results found"
        raise ValueError(f"nothing to report from {', '.join(map(str, paths + pfram_files))} ({reasons})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(shown, mixture, skipped, title), encoding="utf-8")
    md.write_text(markdown(shown, mixture, skipped, title), encoding="utf-8")
    steps.update(1)
    table_dir.mkdir(exist_ok=True)
    (table_dir / ".lmms-scene-report").write_text("tables written by lmms-scene report\n", encoding="utf-8")
    csvs: list[Path] = []
    seen: set[str] = set()
    for v in shown:
        for t in v.tables:
            stem = slugify(t.slug)
            while stem in seen:
                stem += "-x"
            seen.add(stem)
            path = table_dir / f"{stem}.csv"
            path.write_text(t.csv(), encoding="utf-8")
            csvs.append(path)
    steps.update(1)
    steps.close()
    used = [r for v in shown for r in v.used]
    return ReportInfo(
        out=out,
        markdown=md,
        csv=csvs,
        models=sorted({labels.get(id(r), r.label) for r in used}),
        benchmarks=[v.benchmark for v in shown],
        n_tables=sum(len(v.tables) for v in shown),
        n_plots=sum(len(v.plots) for v in shown),
        skipped=skipped,
        mixture=list(mixture),
        replaced=replaced,
        views=shown,
    )
