"""The HTML report: one self-contained page comparing lmms-eval results of several models.

:func:`build_report` reads results folders or files (one per model; the ``scene_blind``
baseline is a model like any other), Pfram score files (``lmms-scene pfram score
--output``) optionally, and writes:

- ``out`` (e.g. ``report.html``): one HTML file that needs no network: CSS inline,
  plots embedded as base64 PNG, no external URL;
- ``report.md`` beside it: every table as Markdown, with its provenance lines;
- ``tables/*.csv`` beside it: every table as CSV (intervals in their own columns).

Every number is read from what the results hold (the COOCO breakdown, the Layered-VQA
report, the SNUS report through its registry ``tables``): means with the 95% intervals
:mod:`lmms_scene.metrics.rows` computed when the task ran. Nothing is recomputed.

Bad input never stops the report: a corrupted JSON, a results file from another
harness version, a task without the report dict its benchmark writes, a second run of
the same model on the same task, a model missing a task the others have: each is listed
(path and reason) in the page, in ``report.md`` and in :attr:`ReportInfo.skipped`.
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene.report.tables import Table, Value, parse_markdown, slugify, value_of

#: the harness release whose results files this report reads (a results file naming
#: another release is skipped; a git install writes ``main@<hash>`` and is read)
HARNESS_SERIES = "0.7."


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


@dataclass
class Plot:
    title: str
    png: bytes


@dataclass
class Section:
    key: str
    title: str
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the task results its numbers come from
    used: list[Any] = field(default_factory=list)


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
                    skipped.append((str(f), f"written by lmms-eval {version}; this report reads lmms-eval "
                                            f"{HARNESS_SERIES}x results (re-run with the tested harness)"))  # fmt: skip
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
    """lmms-scene task results, one per (model, task): the newest run wins, the others are
    listed as skipped."""
    keep: dict[tuple[str, str], Any] = {}
    for r in sorted(results, key=lambda r: (_run_key(r.source), str(r.source)), reverse=True):
        if r.benchmark is None:
            skipped.append((str(r.source), f"task {r.task}: not an lmms-scene task"))
            continue
        if r.source.suffix == ".jsonl":
            skipped.append((str(r.source), f"task {r.task}: a samples file without its results JSON; the report "
                                           "reads the report dicts results JSONs hold"))  # fmt: skip
            continue
        key = (r.label, r.task)
        if key in keep:
            newer = keep[key].source
            why = "the same file was given twice" if newer == r.source else f"the newer run {newer} is shown"
            skipped.append((str(r.source), f"second run of model {r.label} on task {r.task}: {why}"))
            continue
        keep[key] = r
    return sorted(keep.values(), key=lambda r: (r.label, r.task))


def _missing_tasks(selected: Sequence[Any], skipped: list[tuple[str, str]]) -> None:
    by_bench: dict[str, dict[str, set[str]]] = {}
    sources: dict[str, str] = {}
    for r in selected:
        by_bench.setdefault(r.benchmark, {}).setdefault(r.label, set()).add(r.task)
        sources.setdefault(r.label, str(r.source.parent))
    for bench, models in by_bench.items():
        every = set().union(*models.values())
        for model, tasks in models.items():
            for task in sorted(every - tasks):
                others = sorted(m for m, t in models.items() if task in t)
                skipped.append((sources[model], f"model {model} has no {task} results ({', '.join(others)} "
                                                f"do); its entries for {task} are blank"))  # fmt: skip


# -- provenance ------------------------------------------------------------------------------


def _run_line(r: Any) -> str:
    args = r.model_args or "-"
    limit = f"; --limit {r.limit} (partial run)" if r.limit not in (None, "", "None") else ""
    return f"{r.label} ({r.task}): model {r.model}, model_args {args}{limit}; source {r.source}"


def _no_report(r: Any, key: str) -> str:
    return f"task {r.task}: no '{key}' dict in its metrics (results from another lmms-scene version?)"


def _thresholds(sc: Mapping[str, Any]) -> str:
    th = sc.get("thresholds") or {}
    return ", ".join(f"{k} {v}" for k, v in th.items()) if th else "none"


# -- COOCO ---------------------------------------------------------------------------------

COOCO_METRICS = (
    ("refclipscore", "RefCLIPScore"),
    ("accuracy", "accuracy (CLIP text cosine >= threshold)"),
    ("levenshtein_accuracy", "Levenshtein accuracy"),
)


def _cooco(results: Sequence[Any], skipped: list[tuple[str, str]]) -> Section:
    from lmms_scene.metrics import naming
    from lmms_scene.report import plots

    sec = Section("cooco", "COOCO")
    reports: dict[str, list[tuple[Any, Mapping[str, Any]]]] = {}
    for r in results:
        rep = r.metrics.get(naming.BREAKDOWN_KEY)
        if not isinstance(rep, Mapping) or not isinstance(rep.get("by_condition_noise"), Mapping):
            skipped.append((str(r.source), _no_report(r, naming.BREAKDOWN_KEY)))
            continue
        reports.setdefault(r.label, []).append((r, rep))
        sec.used.append(r)
    if not reports:
        sec.notes.append("No COOCO breakdown in these results.")
        return sec
    grids = {m: naming.merge_reports([rep for _, rep in reps]) for m, reps in reports.items()}
    prov = []
    for m, reps in reports.items():
        for r, rep in reps:
            sc = rep.get("scorer") or {}
            clip = sc.get("clip_model") or sc.get("clip_metrics") or "?"
            prov.append(
                f"{_run_line(r)}; scorer {sc.get('scorer', '?')} (lmms-scene {sc.get('lmms_scene_version', '?')}, "
                f"normaliser {sc.get('normaliser', '?')}); CLIP {clip}; thresholds: {_thresholds(sc)}; "
                f"intervals: {sc.get('intervals', '95% percentile bootstrap over images')}"
            )
    conditions = list(naming.CONDITIONS) + sorted({c for g in grids.values() for c in g} - set(naming.CONDITIONS))
    models = list(grids)

    def cell(grid: Mapping[str, Any], c: str, area: str, level: str) -> Mapping[str, Any] | None:
        return grid.get(c, {}).get(area, {}).get(level)

    for metric, title in COOCO_METRICS:
        computed = any(
            lv.get(metric) is not None for g in grids.values() for a in g.values() for lvs in a.values() for lv in lvs.values()
        )  # fmt: skip
        if not computed:
            why = sorted({re.sub(r"^not computed\s*", "", str((rep.get("scorer") or {}).get("clip_metrics") or ""))
                          .strip("() ") or "no value in any cell" for reps in reports.values() for _, rep in reps})  # fmt: skip
            sec.notes.append(f"{title}: not computed in these results ({'; '.join(why)}); its figures are left out.")
            continue
        rows = [[c, *(value_of(cell(grids[m], c, "none", "0"), metric) for m in models)] for c in conditions]
        sec.tables.append(Table(f"COOCO Figure 3: {title} at noise level 0", ["condition", *models], rows, prov,
                                slug=f"cooco-figure3-{metric}"))  # fmt: skip
        sec.plots.append(Plot(f"COOCO Figure 3: {title} by relatedness (no noise), 95% intervals",
                              plots.grouped_bars(conditions, {m: [r[1 + i] for r in rows] for i, m in enumerate(models)},
                                                 f"{title} at noise level 0", title.split(" (")[0])))  # fmt: skip
        for m in models:
            g = grids[m]
            areas = [a for a in ("context", "target", "all") if any(a in g.get(c, {}) for c in conditions)]
            if not areas:
                continue
            settings = [("none", "0")] + [(a, lv) for a in areas for lv in ("0.5", "1")]
            header = ["condition", *("no noise" if a == "none" else f"{a} {lv}" for a, lv in settings)]
            rows4 = [[c, *(value_of(cell(g, c, a, lv), metric) for a, lv in settings)] for c in conditions]
            sec.tables.append(Table(f"COOCO Figure 4: {title} by relatedness x noise area x level ({m})", header, rows4,
                                    [p for p in prov if p.startswith(f"{m} (")], slug=f"cooco-figure4-{metric}-{m}"))  # fmt: skip
            panels = {
                a: {c: [(0.0, value_of(cell(g, c, "none", "0"), metric)),
                        *((float(lv), value_of(cell(g, c, a, lv), metric)) for lv in ("0.5", "1"))] for c in conditions}
                for a in areas
            }  # fmt: skip
            sec.plots.append(Plot(f"COOCO Figure 4: {title} by noise area and level ({m}), 95% intervals",
                                  plots.level_lines(panels, f"{title} ({m})", title.split(" (")[0])))  # fmt: skip
    # output-scene similarity and context capture (incongruent conditions), no noise
    header = ["condition"]
    for m in models:
        header += [f"{m} output-scene similarity", f"{m} context capture"]
    rows = []
    for c in conditions:
        line: list[Any] = [c]
        for m in models:
            cl = cell(grids[m], c, "none", "0")
            line += [value_of(cl, "output_scene_similarity"), value_of(cl, "context_capture_rate")]
        rows.append(line)
    for m, reps in reports.items():
        for r, rep in reps:
            line = [f"all ({m}, {r.task})"]
            for mm in models:
                ov = rep.get("overall") if mm == m else None
                line += [value_of(ov, "output_scene_similarity"), value_of(ov, "context_capture_rate")]
            rows.append(line)
    if any(isinstance(v, Value) for row in rows for v in row[1:]):
        sec.tables.append(Table("COOCO: output-scene similarity and context-capture rate (no noise; 'all' rows: every"
                                " noise setting of the task)", header, rows, prov, slug="cooco-scene-capture"))  # fmt: skip
    else:
        sec.notes.append("Output-scene similarity and context capture: not computed in these results (they need CLIP).")
    stats = []
    for m, reps in reports.items():
        for r, rep in reps:
            st = rep.get("output_statistics") or {}
            stats.append([m, r.task, st.get("n"), st.get("n_empty"), st.get("n_verbose"), st.get("n_unscored"),
                          rep.get("n_duplicate_rows_dropped")])  # fmt: skip
    sec.tables.append(Table("COOCO: outputs (every one scored; unscored rows are counted, never zeros)",
                            ["model", "task", "n", "empty", "verbose", "unscored", "duplicates dropped"], stats, prov,
                            slug="cooco-outputs"))  # fmt: skip
    return sec


# -- Layered-VQA ------------------------------------------------------------------------------

VQA_KEY = "layered_vqa_report"


def _merge_vqa(reps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One model's reports (one per task) side by side: cells of the first report that has
    them (a per-schedule run has one schedule per task)."""
    out: dict[str, Any] = {"by_schedule": {}, "retained": {}, "by_type_schedule": {}, "evidence": {},
                           "grounding": {}, "by_column": {}}  # fmt: skip
    for rep in reps:
        for s, c in (rep.get("by_schedule") or {}).items():
            out["by_schedule"].setdefault(s, c)
        for s, c in (rep.get("retained") or {}).items():
            if s == "by_column":
                for col, v in c.items():
                    out["by_column"].setdefault(col, v)
            else:
                out["retained"].setdefault(s, c)
        for t, cells in (rep.get("by_type_schedule") or {}).items():
            for s, c in cells.items():
                out["by_type_schedule"].setdefault(t, {}).setdefault(s, c)
        for s, c in (rep.get("evidence") or {}).items():
            out["evidence"].setdefault(s, c)
        for s, c in ((rep.get("grounding") or {}).get("by_schedule") or {}).items():
            out["grounding"].setdefault(s, c)
    return out


def _vqa(results: Sequence[Any], skipped: list[tuple[str, str]]) -> Section:
    from lmms_scene.data.layered_vqa import SCHEDULES
    from lmms_scene.metrics import vqa
    from lmms_scene.report import plots

    sec = Section("layered_vqa", "Layered-VQA")
    reports: dict[str, list[tuple[Any, Mapping[str, Any]]]] = {}
    for r in results:
        rep = r.metrics.get(VQA_KEY)
        if not isinstance(rep, Mapping) or not isinstance(rep.get("by_schedule"), Mapping):
            skipped.append((str(r.source), _no_report(r, VQA_KEY)))
            continue
        reports.setdefault(r.label, []).append((r, rep))
        sec.used.append(r)
    if not reports:
        sec.notes.append("No Layered-VQA report in these results.")
        return sec
    prov = []
    for m, reps in reports.items():
        for r, rep in reps:
            sc = rep.get("scorer") or {}
            iv = rep.get("interval") or {}
            prov.append(
                f"{_run_line(r)}; grader {rep.get('grader', sc.get('grader', '?'))} ({sc.get('grade', '?')}, synonyms "
                f"{', '.join(map(str, rep.get('synonyms') or [])) or '-'}); lmms-scene {sc.get('lmms_scene_version', '?')}; "
                f"intervals: {iv.get('method', '?')} over {iv.get('cluster', '?')}, {iv.get('n_boot', '?')} resamples, "
                f"seed {iv.get('seed', '?')}, level {iv.get('level', '?')}; {rep.get('n_rows', '?')} rows, "
                f"{rep.get('n_failed_conversations', 0)} failed conversations"
            )
    merged = {m: _merge_vqa([rep for _, rep in reps]) for m, reps in reports.items()}
    scheds = [s for s in SCHEDULES if any(s in g["by_schedule"] for g in merged.values())]
    cols = ("text", "visual", "layered")
    # the paper's headline first: retained accuracy Text / Visual / Layered (a per-schedule run
    # holds it in its group's results, computed from the tasks' parts, without an interval)
    groups: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.config.get("group") and any(isinstance(r.metrics.get(f"retained_{c}"), (int, float)) for c in cols):
            groups.setdefault(r.label, {}).update({c: {"retained_accuracy": r.metrics.get(f"retained_{c}")} for c in cols
                                                   if isinstance(r.metrics.get(f"retained_{c}"), (int, float))})  # fmt: skip
    rows = [[m, *(value_of(g["by_column"].get(c) or groups.get(m, {}).get(c), "retained_accuracy") for c in cols),
             *(value_of(g["by_schedule"].get(s), "accuracy") for s in scheds)] for m, g in merged.items()]  # fmt: skip
    sec.tables.append(Table("Layered-VQA Table 1: retained accuracy (each column's mean schedule accuracy over full's) "
                            "and final-turn accuracy per schedule",
                            ["model", *(f"retained {c}" for c in cols), *scheds], rows, prov, slug="vqa-table1"))  # fmt: skip
    sec.plots.append(Plot("Layered-VQA: accuracy per schedule, 95% intervals (scenes resampled)",
                          plots.grouped_bars(scheds, {m: [value_of(g["by_schedule"].get(s), "accuracy") for s in scheds]
                                                      for m, g in merged.items()}, "accuracy per delivery schedule",
                                             "accuracy")))  # fmt: skip
    rs = [s for s in scheds if s != "full"]
    rows = [[m, *(value_of(g["retained"].get(s), "retained_accuracy") for s in rs)] for m, g in merged.items()]
    if any(isinstance(v, Value) for row in rows for v in row[1:]):
        sec.tables.append(Table("Layered-VQA: retained accuracy per schedule (correct under the schedule / correct "
                                "under full, same questions)", ["model", *rs], rows, prov, slug="vqa-retained"))  # fmt: skip
    for m, g in merged.items():
        mp = [p for p in prov if p.startswith(f"{m} (")]
        if g["evidence"]:
            keys = list(vqa.SELECTION_METRICS)
            rows = [[s, *(value_of(c, k) for k in keys)] for s, c in g["evidence"].items()]
            sec.tables.append(Table(f"Layered-VQA Table 2: evidence handed over ({m})", ["schedule", *keys], rows, mp,
                                    slug=f"vqa-evidence-{m}"))  # fmt: skip
        if g["grounding"]:
            keys = list(vqa.GROUNDING)
            rows = [[s, *(value_of(c, k) for k in keys)] for s, c in g["grounding"].items()]
            sec.tables.append(Table(f"Layered-VQA: grounding of multi-turn answers ({m})", ["schedule", *keys], rows,
                                    mp, slug=f"vqa-grounding-{m}"))  # fmt: skip
        for r, rep in reports[m]:  # Figures 6, 8, 9: from the report that holds them (every schedule in one task)
            att = rep.get("attempts") or {}
            if att.get("by_attempt"):
                base = value_of(att.get("baseline"), "accuracy")
                rows = [[k, value_of(c, "words"), value_of(c, "accuracy"), c.get("n")] for k, c in att["by_attempt"].items()]
                sec.tables.append(Table(f"Layered-VQA Figure 6: successive answer attempts ({m}; single-turn baseline, "
                                        f"full on the same questions: {base.mean:.3f})" if base else
                                        f"Layered-VQA Figure 6: successive answer attempts ({m})",
                                        ["attempt", "words", "accuracy", "n"], rows, mp, slug=f"vqa-attempts-{m}"))  # fmt: skip
            res = rep.get("restoration") or {}
            if res:
                rows = [[k, e.get("fragmented"), e.get("restored"), *(value_of(e, x) for x in ("cost", "recovery", "overshoot"))]
                        for k, e in res.items()]  # fmt: skip
                sec.tables.append(Table(f"Layered-VQA Figure 9: fragmenting and restoring each stream, against full ({m})",
                                        ["stream", "fragmented", "restored", "cost", "recovery", "overshoot"], rows, mp,
                                        slug=f"vqa-restoration-{m}"))  # fmt: skip
            conc = rep.get("loss_concentration") or {}
            if conc:
                rows = [[c, e.get("questions"), e.get("total_loss"), e.get("share_of_questions_for_half"),
                         e.get("share_of_questions_for_80")] for c, e in conc.items()]  # fmt: skip
                sec.tables.append(Table(f"Layered-VQA Figure 8: how concentrated the loss against full is ({m})",
                                        ["condition", "questions", "total loss", "share of questions: half", "share: 80%"],
                                        rows, mp, slug=f"vqa-concentration-{m}"))  # fmt: skip
            if att or res or conc:
                break
        if g["by_type_schedule"]:
            ts = [s for s in scheds if any(s in cells for cells in g["by_type_schedule"].values())]
            rows = [[t, *(value_of(cells.get(s), "accuracy") for s in ts)] for t, cells in g["by_type_schedule"].items()]
            sec.tables.append(Table(f"Layered-VQA Table 3: accuracy per question type ({m})", ["question type", *ts],
                                    rows, mp, slug=f"vqa-types-{m}"))  # fmt: skip
    return sec


# -- any other benchmark: its registry tables ---------------------------------------------------


def _registry_section(bench: Any, results: Sequence[Any], skipped: list[tuple[str, str]]) -> Section:
    """A benchmark's own ``tables`` (Markdown) as report tables: SNUS's Table 2 layout,
    and the layout of any benchmark added later."""
    from lmms_scene import benchmarks

    sec = Section(bench.name, bench.title)
    try:
        text = benchmarks.resolve(bench.tables)(list(results))
    except Exception as exc:  # noqa: BLE001 - a broken report dict must not stop the page
        for r in results:
            skipped.append((str(r.source), f"task {r.task}: {bench.title} tables failed ({type(exc).__name__}: {exc})"))
        return sec
    found, notes = parse_markdown(text)
    if not found:
        for r in results:
            skipped.append((str(r.source), f"task {r.task}: {text.strip()[:300]}"))
        return sec
    # a result the benchmark's tables passed over (e.g. its report dict is from another version)
    sec.used = [r for r in results if r.label in text]
    for r in results:
        if not any(r is u for u in sec.used):
            skipped.append((str(r.source), f"task {r.task}: {bench.title}'s tables show nothing for {r.label}"))
    runs = [_run_line(r) for r in sec.used]
    for i, (title, header, rows) in enumerate(found):
        sec.tables.append(Table(f"{bench.title} {title}", header, rows, [*runs, *notes],
                                slug=f"{bench.name}-{i + 1}-{slugify(title)[:40]}"))  # fmt: skip
    return sec


# -- Pfram ------------------------------------------------------------------------------------


def _pfram(files: Sequence[Path], skipped: list[tuple[str, str]]) -> Section:
    from lmms_scene.report import plots

    sec = Section("pfram", "Pfram")
    curves: dict[str, tuple[list[str], list[Value | None]]] = {}
    prov: list[str] = []
    summary: list[list[Any]] = []
    for f in files:
        try:
            data = json.loads(Path(f).read_text(encoding="utf-8"))
            rows = data["rows"]
            if not isinstance(rows, list):
                raise TypeError("'rows' is not a list")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            skipped.append((str(f), f"not a 'pfram score' output ({type(exc).__name__}: {exc})"))
            continue
        pv = data.get("provenance") or {}
        ckpt = str(pv.get("checkpoint") or Path(f).stem)
        name = ckpt.rstrip("/").rsplit("/", 1)[-1]
        prov.append(f"{name}: {data.get('computed_by', '?')}; checkpoint {ckpt}; gold {pv.get('gold', '?')}; "
                    f"thresholds: {_thresholds(pv)}; source {f}")  # fmt: skip
        for i, row in enumerate(rows):
            layers = row.get("layers") if isinstance(row, Mapping) else None
            if not isinstance(layers, Mapping) or not layers:
                skipped.append((str(f), f"row {i}: no 'layers' scores"))
                continue
            ci = row.get("ci95") or {}
            label = f"{name} {row.get('phi')} k={row.get('k')} ties={row.get('ties')}"
            names = list(layers)
            curves[label] = (names, [Value(float(layers[x]), ci.get(x)) for x in names])
            summary.append([label, *(row.get(k) for k in ("input", "mean", "max")), row.get("skipped_anchors")])
    if not curves:
        sec.notes.append("No Pfram scores given (pass --pfram FILE, the output of `lmms-scene pfram score --output FILE`).")
        return sec
    layers = list(dict.fromkeys(x for names, _ in curves.values() for x in names))
    rows = [[x, *(dict(zip(*c)).get(x) for c in curves.values())] for x in layers]
    sec.tables.append(Table("Pfram per layer", ["layer", *curves], rows, prov, slug="pfram-layers"))
    sec.tables.append(Table("Pfram summaries (input layer, mean and max over the LLM layers)",
                            ["setting", "Pfram_input", "Pfram_mean", "Pfram_max", "undefined anchors"], summary, prov,
                            slug="pfram-summary"))  # fmt: skip
    sec.plots.append(Plot("Pfram per layer (95% interval shaded when scored with --bootstrap)",
                          plots.layer_curves(curves, "Pfram per layer")))  # fmt: skip
    return sec


# -- writing ----------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em}
.meta{color:#555;font-size:.9em}nav a{margin-right:1em}
figure{margin:1.2em 0}figcaption{font-weight:600;margin-bottom:.4em}
table{border-collapse:collapse;font-size:.82em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;white-space:nowrap}th{background:#f3f3f3}
tbody tr:nth-child(even){background:#fafafa}
ul.provenance{font-size:.75em;color:#555;margin:.3em 0 0 1em;padding:0}
img.plot{max-width:100%;border:1px solid #eee}
.skipped li{font-size:.85em}.note{color:#8a5a00}
"""


def _page(sections: Sequence[Section], runs: Sequence[str], skipped: Sequence[tuple[str, str]], title: str) -> str:
    import lmms_scene

    e = html_lib.escape
    nav = "".join(f'<a href="#{e(s.key)}">{e(s.title)}</a>' for s in sections) + '<a href="#skipped">Skipped</a>'
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">Written by lmms-scene {e(getattr(lmms_scene, "__version__", "?"))}. Every number is '
        "mean [95% interval] (n) as the results hold it; intervals are percentile bootstraps over items "
        "(images; scenes for Layered-VQA).</p>",
        f"<nav>{nav}</nav>", "<h2>Runs</h2><ul>" + "".join(f"<li>{e(r)}</li>" for r in runs) + "</ul>",
    ]  # fmt: skip
    for s in sections:
        parts.append(f'<section id="{e(s.key)}"><h2>{e(s.title)}</h2>')
        parts += [f'<p class="note">{e(n)}</p>' for n in s.notes]
        for p in s.plots:
            data = base64.b64encode(p.png).decode("ascii")
            parts.append(f'<figure class="plot"><figcaption>{e(p.title)}</figcaption>'
                         f'<img class="plot" alt="{e(p.title)}" src="data:image/png;base64,{data}"></figure>')  # fmt: skip
        parts += [t.html() for t in s.tables]
        parts.append("</section>")
    items = "".join(f"<li><code>{e(p)}</code>: {e(why)}</li>" for p, why in skipped) or "<li>nothing</li>"
    parts.append(f'<section id="skipped" class="skipped"><h2>Skipped</h2><ul>{items}</ul></section>')
    parts.append("</body></html>")
    return "\n".join(parts)


def _markdown(sections: Sequence[Section], runs: Sequence[str], skipped: Sequence[tuple[str, str]], title: str) -> str:
    out = [f"# {title}", "", "## Runs", "", *(f"- {r}" for r in runs)]
    for s in sections:
        out += ["", f"## {s.title}", ""]
        out += [f"{n}\n" for n in s.notes]
        out += [t.markdown() + "\n" for t in s.tables]
    out += ["", "## Skipped", ""] + ([f"- `{p}`: {why}" for p, why in skipped] or ["nothing"])
    return "\n".join(out) + "\n"


def build_report(
    paths: str | Path | Iterable[str | Path],
    out: str | Path,
    pfram: Iterable[str | Path] | None = None,
    *,
    title: str = "lmms-scene report",
    progress: bool = False,
) -> ReportInfo:
    """Write the report of ``paths`` (results folders or files, one per model) to ``out``
    (HTML), with ``report.md`` and ``tables/*.csv`` beside it; see the module docstring.

    Raises ``ValueError`` when nothing at all could be reported (no lmms-scene results and
    no Pfram scores); anything less is listed in :attr:`ReportInfo.skipped`.
    """
    from tqdm.auto import tqdm

    from lmms_scene import benchmarks
    from lmms_scene import results as results_lib

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    pfram_files = [Path(p) for p in (pfram or [])]
    out = Path(out)
    if not paths and not pfram_files:
        raise ValueError("paths: give at least one results folder or file (or --pfram score files)")
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"out: expected an .html file name, got {str(out)!r}")
    skipped: list[tuple[str, str]] = []
    steps = tqdm(total=3 + len(benchmarks.BENCHMARKS), desc="lmms-scene report", disable=not progress, unit="step")
    loaded = results_lib.load(_results_files(paths, skipped)) if paths else results_lib.Loaded()
    skipped += loaded.skipped
    selected = _select(loaded.results, skipped)
    _missing_tasks(selected, skipped)
    steps.update(1)
    sections: list[Section] = []
    custom = {"cooco": _cooco, "layered_vqa": _vqa}
    for bench in benchmarks.BENCHMARKS:
        steps.set_postfix_str(bench.title)
        mine = [r for r in selected if r.benchmark == bench.name]
        if mine:
            build = custom.get(bench.name)
            sec = build(mine, skipped) if build else _registry_section(bench, mine, skipped)
            if sec.tables or sec.plots:
                sections.append(sec)
        steps.update(1)
    if pfram_files:
        sec = _pfram(pfram_files, skipped)
        if sec.tables:
            sections.append(sec)
    steps.update(1)
    if not sections:
        steps.close()
        reasons = "; ".join(f"{p}: {why}" for p, why in skipped[:10]) or "no results found"
        raise ValueError(f"nothing to report from {', '.join(map(str, paths + pfram_files))} ({reasons})")
    used = sorted((r for s in sections for r in s.used), key=lambda r: (r.label, r.task))
    runs = [_run_line(r) for r in used]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_page(sections, runs, skipped, title), encoding="utf-8")
    md = out.with_name("report.md")
    md.write_text(_markdown(sections, runs, skipped, title), encoding="utf-8")
    table_dir = out.with_name("tables")
    table_dir.mkdir(exist_ok=True)
    csvs: list[Path] = []
    seen: set[str] = set()
    for s in sections:
        for t in s.tables:
            stem = slugify(t.slug)
            while stem in seen:
                stem += "-x"
            seen.add(stem)
            path = table_dir / f"{stem}.csv"
            path.write_text(t.csv(), encoding="utf-8")
            csvs.append(path)
    steps.update(1)
    steps.close()
    return ReportInfo(
        out=out, markdown=md, csv=csvs, models=sorted({r.label for r in used}),
        benchmarks=[s.key for s in sections], n_tables=sum(len(s.tables) for s in sections),
        n_plots=sum(len(s.plots) for s in sections), skipped=skipped,
    )  # fmt: skip
