"""Layered-VQA's results, read once: the headline cell (Table 1's retained accuracy Text /
Visual / Layered, the final-turn accuracy beside it), the failures that make a run
unrankable, the rows a submission carries for verification, and Tables 1-8 with Figures
6, 8 and 9, for ``lmms-scene show``, the HTML report, ``report.md`` and the CSV files.

A run is one of two shapes. The sample task (and any task holding every schedule) stores
one report with every number and its interval. A run of the 16 schedule tasks stores one
report per schedule, and its group stores the retained accuracy (from the tasks' parts,
no interval); the tables that compare schedules question by question (Tables 2-8, the
figures) then come from the tasks' logged samples pooled once, with the tasks' own
interval settings, and say so. Nothing else is recomputed; :func:`recompute` is what the
leaderboard uses to check a submission (:func:`lmms_scene.metrics.layered_vqa.aggregation.headline_cell`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, SELECTION
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.layered_vqa import aggregation, scoring
from lmms_scene.report.tables import (
    Plot,
    Run,
    Table,
    Value,
    View,
    row_label,
    unscored_note,
    value_of,
)
from lmms_scene.results import short_fingerprint, stored_report

REPORT_KEY = benchmarks.get("layered_vqa").report_key
#: Table 1's retained-accuracy columns (which schedules each holds: :data:`aggregation.RETAINED_COLUMNS`)
COLUMNS: tuple[str, ...] = tuple(aggregation.RETAINED_COLUMNS)
#: what a ``layered_vqa`` group result states: the metrics the registry declares with a group aggregation
HEADLINE: tuple[str, ...] = tuple(m.name for m in benchmarks.get("layered_vqa").metrics if m.group_aggregation)
#: what identifies an item of the dataset, and its gold fields (the data fingerprint's)
ITEM_FIELDS = aggregation.ITEM_FIELDS
DATA_FIELDS = aggregation.DATA_FIELDS
VERIFY_FIELDS: tuple[str, ...] = (
    "scene_id",
    "question_id",
    "schedule",
    "repeat",
    "correct",
    "empty",
    "cannot_tell",
    *aggregation.DATA_FIELDS,
    "output",
    "depth",
)
ROW_ID_FIELDS: tuple[str, ...] = ("scene_id", "question_id", "schedule", "repeat")
VIEW_FIELDS: tuple[str, ...] = ("schedule", "repeat")
ROW_TYPES: dict[str, Any] = {
    "scene_id": "str",
    "question_id": "str",
    "schedule": tuple(SCHEDULES),
    "repeat": "int",
    "correct": "bool?",
    "empty": "bool?",
    "cannot_tell": "bool?",
    "question": "str",
    "answer": "str",
    "question_type": "str",
    "output": "str",
    "depth": "int",
}
N_NOTE = "n = questions (x schedules); intervals resample scenes"
# the headline compares schedules, so it is computed from every task's rows of a run together:
# the registry entry declares it (``Benchmark.pooled``) and group_summary reads a group's numbers


def identity(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return rows_lib.dataset_identity(aggregation.expand_repeats(rows), aggregation.ITEM_FIELDS, aggregation.DATA_FIELDS)


def report_of(result: Any) -> Mapping[str, Any] | None:
    """The report the results hold; for a lone samples file (no results JSON), the one its
    logged rows give (the task's own function over the same rows)."""
    return stored_report(result, REPORT_KEY, "by_schedule", aggregation.report)


def summary(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The headline cell of a report that holds every schedule (the retained columns need
    ``full`` and the others); a one-schedule task's report has only its accuracy."""
    cell = report.get("overall")
    return cell if isinstance(cell, Mapping) else None


def group_summary(result: Any) -> Mapping[str, Any] | None:
    """The headline cell a ``layered_vqa`` group result holds (retained accuracy from its
    schedule tasks' parts; no interval), or None."""
    if not result.config.get("group"):
        return None
    cell = {m: float(result.metrics[m]) for m in HEADLINE if isinstance(result.metrics.get(m), (int, float))}
    return cell or None


def failures(report: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(counts, reasons): failed conversations, empty outputs, judge failures."""
    cell = report.get("overall") or {}
    n = report.get("n_rows")
    rate = cell.get("empty_output_rate")
    n_empty = round(rate * n) if isinstance(rate, (int, float)) and isinstance(n, int) else None
    failed = report.get("n_failed_conversations")
    unscored = report.get("n_unscored")
    worst = max(v for v in (failed, unscored, 0) if isinstance(v, int))
    counts: dict[str, Any] = {
        "n": n,
        "n_empty": n_empty,
        "n_unscored": worst if failed is not None else None,
        "n_failed_conversations": failed,
    }
    reasons = []
    if not isinstance(n, int) or n_empty is None or failed is None:
        reasons.append(f"its {REPORT_KEY} does not record how many outputs were empty or failed")
    elif failed:
        reasons.append(f"{failed} failed conversations")
    if isinstance(unscored, int) and unscored and unscored != failed:
        reasons.append(f"{unscored} rows could not be scored")
    judges = report.get("judges")
    if isinstance(judges, Mapping):
        counts["judge_failed_calls"] = judges.get("failed_calls", 0)
        counts["judge_no_consensus"] = judges.get("no_consensus", 0)
        if counts["judge_failed_calls"] or counts["judge_no_consensus"]:
            reasons.append(
                f"judge failures ({counts['judge_failed_calls']} failed judge calls, "
                f"{counts['judge_no_consensus']} rows without consensus)"
            )
    return counts, reasons


def verification_rows(result: Any) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in VERIFY_FIELDS} for r in aggregation.expand_repeats(result.rows(REPORT_KEY))]


def recompute(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline cell and the data identity from every schedule's rows of a run, with
    the accuracy under ``full`` beside the pooled accuracy (the leaderboard shows both)."""
    cell = dict(aggregation.headline_cell(rows))
    unique = rows_lib.dedupe(aggregation.expand_repeats(rows), ROW_ID_FIELDS, same=()).rows
    full = rows_lib.cell(
        [r for r in unique if r.get("schedule") == "full"],
        {"accuracy": aggregation.ACCURACY["accuracy"]},
        aggregation.CLUSTER,
    )
    if full.get("accuracy") is not None:
        cell["accuracy_full"] = full["accuracy"]
        cell["ci95"] = {**(cell.get("ci95") or {}), "accuracy_full": (full.get("ci95") or {}).get("accuracy")}
    return {"cell": cell, "dataset": identity(rows)}


def expected_views(task: str, rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
    """Every item under every one of the paper's 16 delivery schedules, each repeat."""
    repeats = {r.get("repeat") for r in rows} or {0}
    return {(s, k) for s in SCHEDULES for k in repeats}


def rederive(
    rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """(problems, notes): every graded row's verdict recomputed from its final reply and
    gold with the task's rule grader (the evidence-selection line read first, as the task
    does); a problem names the row, the field, the stated and the recomputed value."""
    lemma_names, synonyms = scoring.default_lemma_names()
    problems: list[str] = []
    for r in rows:
        where = row_label(r, ROW_ID_FIELDS)
        final = str(r.get("output") or "")
        if r.get("correct") is None:
            continue
        if r.get("empty") is not (not final.strip()):
            problems.append(f"{where}: empty is {r.get('empty')!r} but its output gives {not final.strip()!r}")
        answer_text = final
        try:
            if r.get("schedule") in SELECTION:
                _, answer_text = scoring.parse_selection(final, int(r.get("depth") or 0))
            g = scoring.grade(answer_text, r.get("answer"), r.get("question_type"), r.get("question"), lemma_names)
        except Exception as exc:  # noqa: BLE001 - a hostile output must cost its row, not the board
            problems.append(f"{where}: its output cannot be graded again ({type(exc).__name__}: {exc})")
            continue
        for key, value in (("correct", g.correct), ("cannot_tell", g.cannot_tell)):
            if r.get(key) is not value:
                problems.append(f"{where}: {key} is {r.get(key)!r} but its output gives {value!r}")
    return problems, [f"graded again from the outputs by the rule grader (synonyms: {synonyms})"]


def row_failures(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What makes a run unrankable, counted from its rows: conversations that were not
    graded (they stopped early) and empty final answers."""
    return {
        "n_failed_conversations": sum(1 for r in rows if r.get("correct") is None),
        "n_empty": sum(1 for r in rows if r.get("empty") is True),
    }


# -- tables and figures -----------------------------------------------------------------------


def _percent(entry: Mapping[str, Any] | None) -> Value | None:
    if not isinstance(entry, Mapping) or entry.get("retained_accuracy") is None:
        return None
    ci = entry.get("ci95")
    return Value(float(entry["retained_accuracy"]), list(ci) if ci else None, None, scale=100)


def _scorer(rep: Mapping[str, Any]) -> str:
    sc = rep.get("scorer") or {}
    iv = rep.get("interval") or {}
    return (
        f"grader {rep.get('grader', sc.get('grader', '?'))} ({sc.get('grade', '?')}, synonyms "
        f"{', '.join(map(str, rep.get('synonyms') or [])) or '-'}); lmms-scene {sc.get('lmms_scene_version', '?')}; "
        f"intervals: {iv.get('method', '?')} over {iv.get('cluster', '?')}, {iv.get('n_boot', '?')} resamples, "
        f"seed {iv.get('seed', '?')}, level {iv.get('level', '?')}; {rep.get('n_rows', '?')} rows, "
        f"{rep.get('n_failed_conversations', 0)} failed conversations"
    )


def _merge(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several one-schedule reports side by side: each schedule's cells from the report that has them."""
    out: dict[str, Any] = {"by_schedule": {}, "by_type_schedule": {}, "evidence": {}, "grounding": {}}
    for rep in reports:
        for s, c in (rep.get("by_schedule") or {}).items():
            out["by_schedule"].setdefault(s, c)
        for t, cells in (rep.get("by_type_schedule") or {}).items():
            for s, c in cells.items():
                out["by_type_schedule"].setdefault(t, {}).setdefault(s, c)
        for s, c in (rep.get("evidence") or {}).items():
            out["evidence"].setdefault(s, c)
    return out


def _model_reports(results: Sequence[Any], labels: Mapping[int, str], out: View) -> dict[str, dict[str, Any]]:
    """Per display label: the stored reports, the group's headline, and the one report that
    holds every schedule (stored, or pooled from the logged samples of a per-schedule run)."""
    models: dict[str, dict[str, Any]] = {}
    for r in results:
        label = labels[id(r)]
        entry = models.setdefault(
            label, {"stored": [], "results": [], "group": None, "complete": None, "pooled": False}
        )
        if r.config.get("group"):
            # a group's cell (None when its schedules could not give one, e.g. a --limit run)
            entry["group"] = group_summary(r) or entry["group"]
            continue
        rep = report_of(r)
        if rep is None:
            why = (
                f"task {r.task}: without logged samples and without metrics (run with --log_samples, or give the results JSON)"
                if not r.metrics and not r.samples
                else f"task {r.task}: no '{REPORT_KEY}' dict in its metrics (results from another lmms-scene version?)"
            )
            out.skipped.append((str(r.source), why))
            continue
        entry["stored"].append((r, rep))
        entry["results"].append(r)
        out.used.append(r)
        generated = (
            (r.config.get("metadata") or {}).get("generated") if isinstance(r.config.get("metadata"), Mapping) else None
        )
        if generated and f"{label} ({r.task}): {generated}." not in out.notes:
            out.notes.append(f"{label} ({r.task}): {generated}.")
    for label, entry in list(models.items()):
        if not entry["stored"]:
            del models[label]
            continue
        full = [rep for _, rep in entry["stored"] if (rep.get("retained") or {}).get("by_column")]
        if full:
            entry["complete"] = full[0]
        elif len(entry["stored"]) > 1:
            rows = (
                [row for r, _ in entry["stored"] for row in r.rows(REPORT_KEY)]
                if all(r.samples for r, _ in entry["stored"])
                else []
            )
            if rows:
                entry["complete"] = aggregation.report(rows)
                entry["pooled"] = True
            else:
                out.notes.append(
                    f"{label}: Tables 2-8 compare schedules question by question; these per-schedule results "
                    "have no logged samples to pool (run with --log_samples)."
                )
        first = entry["stored"][0][0]
        out.runs.append(
            Run(
                label,
                [r.task for r, _ in entry["stored"]],
                first.model,
                first.model_args,
                short_fingerprint(first.fingerprint),
                sorted({str(r.source) for r, _ in entry["stored"]}),
                sorted({_scorer(rep) for _, rep in entry["stored"]}),
                first.limit,
            )
        )
    return models


def view(results: Sequence[Any], labels: Mapping[int, str]) -> View:
    out = View("layered_vqa", "Layered-VQA")
    models = _model_reports(results, labels, out)
    if not models:
        out.notes.append("No Layered-VQA report in these results.")
        return out
    merged = {m: _merge([rep for _, rep in e["stored"]]) for m, e in models.items()}
    scheds = [s for s in SCHEDULES if any(s in g["by_schedule"] for g in merged.values())]
    # Table 1: the paper's headline first (retained accuracy, percent), then accuracy per schedule
    rows = []
    for m, e in models.items():
        by_column = ((e["complete"] or {}).get("retained") or {}).get("by_column") or {}
        if not e["pooled"] and by_column:
            retained = [_percent(by_column.get(c)) for c in COLUMNS]
        elif e["group"]:
            retained = [
                Value(e["group"][f"retained_{c}"], None, None, scale=100) if f"retained_{c}" in e["group"] else None
                for c in COLUMNS
            ]
        else:
            retained = [None, None, None]
        rows.append([m, *retained, *(value_of(merged[m]["by_schedule"].get(s), "accuracy") for s in scheds)])
    notes = [
        "Retained accuracy = the mean accuracy of a column's schedules over the accuracy under full, in percent "
        "(Text: the four question-in-text schedules; Visual: the four question-in-layers ones; Layered: alignment "
        "and order). A run of the 16 schedule tasks holds it in its group, without an interval."
    ]
    out.tables.append(
        Table(
            f"Layered-VQA Table 1: retained accuracy (%) and final-turn accuracy per schedule ({N_NOTE})",
            ["model", *(f"retained {c}" for c in COLUMNS), *scheds],
            rows,
            notes,
            slug="vqa-table1",
            key_columns=4,
        )
    )
    out.plots.append(
        Plot(
            "Layered-VQA: final-turn accuracy per schedule, 95% intervals (scenes resampled)",
            "grouped_bars",
            {
                "groups": scheds,
                "series": {
                    m: [value_of(g["by_schedule"].get(s), "accuracy") for s in scheds] for m, g in merged.items()
                },
                "title": "accuracy per delivery schedule",
                "ylabel": "accuracy",
            },
        )
    )
    for m, e in models.items():
        rep = e["complete"]
        if rep is None:
            continue
        where = f"{m}; pooled from the logged samples of its {len(e['stored'])} schedule tasks" if e["pooled"] else m
        _detail_tables(out, rep, where, m, scheds)
    ct = [
        f"{m}: {c:.3f}"
        for m, e in models.items()
        for _, rep in e["stored"][:1]
        if isinstance(c := (rep.get("overall") or {}).get("cannot_tell_rate"), (int, float)) and c
    ]
    if ct:
        out.notes.append(
            "Replies the rule grader could not read an answer from (cannot tell, counted as not right): "
            + "; ".join(ct)
        )
    for m, e in models.items():
        for r, rep in e["stored"]:
            if note := unscored_note(
                f"{m} ({r.task})", rep.get("n_unscored"), rep.get("unscored"), ("question_id", "schedule", "repeat")
            ):
                out.notes.append(note)
    return out


def _cells(title: str, header: list[str], rows: list[list[Any]], slug: str, key_columns: int = 1) -> Table | None:
    if not rows or not any(isinstance(c, Value) or (c not in (None, "")) for row in rows for c in row[1:]):
        return None
    return Table(title, header, rows, slug=slug, key_columns=key_columns)


def _detail_tables(out: View, rep: Mapping[str, Any], where: str, m: str, scheds: Sequence[str]) -> None:
    add = out.tables.append
    slug = m.replace(" ", "-")
    retained = {s: c for s, c in (rep.get("retained") or {}).items() if s != "by_column"}
    if retained:
        rs = [s for s in scheds if s in retained]
        add(
            Table(
                f"Layered-VQA: retained accuracy per schedule (correct under it / correct under full, same questions; {where})",
                ["model", *rs],
                [[m, *(value_of(retained.get(s), "retained_accuracy") for s in rs)]],
                slug=f"vqa-retained-{slug}",
            )
        )
    if rep.get("evidence"):
        keys = list(aggregation.SELECTION_METRICS)
        rows = [
            [s, value_of((rep.get("by_schedule") or {}).get(s), "accuracy"), *(value_of(c, k) for k in keys)]
            for s, c in rep["evidence"].items()
        ]
        add(
            Table(
                f"Layered-VQA Table 2: evidence handed over ({where})",
                ["schedule", "accuracy", *keys],
                rows,
                slug=f"vqa-evidence-{slug}",
            )
        )
    types = rep.get("by_type_schedule") or {}
    if types:
        ts = [s for s in scheds if any(s in cells for cells in types.values())]
        t = _cells(
            f"Layered-VQA Table 3: accuracy per question type ({where})",
            ["question type", *ts],
            [[q, *(value_of(cells.get(s), "accuracy") for s in ts)] for q, cells in types.items()],
            f"vqa-types-{slug}",
        )
        if t:
            add(t)
    g = rep.get("grounding")
    if isinstance(g, Mapping):
        keys = list(aggregation.GROUNDING)
        t = _cells(
            f"Layered-VQA: grounding of multi-turn answers per schedule ({where})",
            ["schedule", *keys],
            [[s, *(value_of(c, k) for k in keys)] for s, c in (g.get("by_schedule") or {}).items()],
            f"vqa-grounding-{slug}",
        )
        if t:
            add(t)
        bins = g.get("first_attempt_bins") or {}
        t = _cells(
            f"Layered-VQA Table 4: first answer attempt, accuracy per position bin and commit share ({where})",
            ["", *scoring.POSITION_BINS, "commit share"],
            [
                [
                    "accuracy",
                    *(value_of(bins.get(b), "accuracy") for b in scoring.POSITION_BINS),
                    value_of(g.get("overall"), "commit_share"),
                ]
            ],
            f"vqa-attempt-bins-{slug}",
        )
        if t:
            add(t)
    bl = rep.get("by_length") or {}
    if bl:
        add(
            Table(
                f"Layered-VQA Table 5: accuracy by evidence length and delivery ({where})",
                ["delivery", *scoring.LENGTH_BINS],
                [[d, *(value_of(cells.get(b), "accuracy") for b in scoring.LENGTH_BINS)] for d, cells in bl.items()],
                slug=f"vqa-length-{slug}",
            )
        )
    if isinstance(g, Mapping):  # Table 6 after Table 5, as the paper numbers them
        fam = g.get("by_family") or {}
        t = _cells(
            f"Layered-VQA Table 6: ungrounded share by family; accuracy as scored vs grounded only ({where})",
            ["", "visual", "alignment", "order", "question", "accuracy as scored", "grounded only"],
            [
                [
                    "share",
                    *(value_of(fam.get(f), "ungrounded_share") for f in ("visual", "alignment", "order", "question")),
                    value_of(g.get("overall"), "accuracy"),
                    value_of(g.get("overall"), "grounded_only_accuracy"),
                ]
            ],
            f"vqa-family-{slug}",
        )
        if t:
            add(t)
    depth = rep.get("by_depth") or {}
    if depth:
        add(
            Table(
                f"Layered-VQA Table 7: loss by scene depth (layers) ({where})",
                ["layers", "questions", "full", "delta concat-v", "delta oracle"],
                [
                    [
                        d,
                        e.get("questions"),
                        value_of(e.get("full"), "accuracy"),
                        value_of(e.get("delta_concat-v"), "loss"),
                        value_of(e.get("delta_oracle"), "loss"),
                    ]
                    for d, e in depth.items()
                ],
                slug=f"vqa-depth-{slug}",
            )
        )
    rel = rep.get("relational") or {}
    if rel:
        add(
            Table(
                f"Layered-VQA Table 8: relational extra loss ({where})",
                ["condition", "relational", "single-object", "extra loss"],
                [
                    [
                        c,
                        e.get("relational"),
                        e.get("single_object"),
                        Value(e["extra_loss"], e.get("ci95")) if e.get("extra_loss") is not None else None,
                    ]
                    for c, e in rel.items()
                ],
                slug=f"vqa-relational-{slug}",
            )
        )
    att = rep.get("attempts") or {}
    if att.get("by_attempt"):
        base = value_of(att.get("baseline"), "accuracy")
        add(
            Table(
                f"Layered-VQA Figure 6: successive answer attempts (single-turn baseline, full on the same questions: "
                f"{base.text() if base else '-'}; {where})",
                ["attempt", "words", "accuracy", "n"],
                [[k, value_of(c, "words"), value_of(c, "accuracy"), c.get("n")] for k, c in att["by_attempt"].items()],
                slug=f"vqa-attempts-{slug}",
            )
        )
    relia = rep.get("reliability") or {}
    if relia:
        add(
            Table(
                f"Layered-VQA Figure 7: repeated sampling (Laban et al.): aptitude P90, unreliability P90 - P10 ({where})",
                ["schedule", "aptitude", "unreliability", "average", "repeats"],
                [
                    [s, value_of(c, "aptitude"), value_of(c, "unreliability"), value_of(c, "average"), c.get("repeats")]
                    for s, c in relia.items()
                ],
                slug=f"vqa-reliability-{slug}",
            )
        )
    conc = rep.get("loss_concentration") or {}
    if conc:
        add(
            Table(
                f"Layered-VQA Figure 8 (left): how concentrated the loss against full is ({where})",
                ["condition", "questions", "total loss", "share of questions: half", "share: 80%"],
                [
                    [
                        c,
                        e.get("questions"),
                        e.get("total_loss"),
                        e.get("share_of_questions_for_half"),
                        e.get("share_of_questions_for_80"),
                    ]
                    for c, e in conc.items()
                ],
                slug=f"vqa-concentration-{slug}",
            )
        )
    res = rep.get("restoration") or {}
    if res:
        add(
            Table(
                f"Layered-VQA Figure 9: fragmenting and restoring each stream, against full ({where})",
                ["stream", "fragmented", "restored", "cost", "recovery", "overshoot"],
                [
                    [
                        k,
                        e.get("fragmented"),
                        e.get("restored"),
                        *(value_of(e, x) for x in ("cost", "recovery", "overshoot")),
                    ]
                    for k, e in res.items()
                ],
                slug=f"vqa-restoration-{slug}",
            )
        )
