"""COOCO's results, read once: the headline cell, the failures that make a run unrankable,
the rows a submission carries for verification, and every table and figure that
``lmms-scene show``, the HTML report, ``report.md`` and the CSV files render.

Numbers come from the breakdowns the tasks wrote (``cooco_breakdown``: means, 95%
intervals with images resampled, n); nothing is recomputed here except by
:func:`recompute`, which the leaderboard uses to check a submission's numbers against its
own rows with the very function the task used (:func:`lmms_scene.metrics.cooco.scoring.overall_cell`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.data.cooco.schema import NAMING_CONDITIONS
from lmms_scene.data.cooco.views import NOISE_AREAS, NOISE_LEVELS
from lmms_scene.metrics import clip as clip_metrics
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.cooco import scoring
from lmms_scene.report.tables import Plot, Run, Table, Value, View, row_label, unscored_note, value_of
from lmms_scene.results import short_fingerprint, stored_report

REPORT_KEY = scoring.BREAKDOWN_KEY
ID_FIELDS = scoring.ID_FIELDS
DATA_FIELDS = scoring.DATA_FIELDS
#: the row fields the headline cell needs (scoring.CELL_METRICS reads these)
#: what identifies an item of the dataset, and its gold fields (the data fingerprint's)
ITEM_FIELDS = scoring.ITEM_FIELDS
VERIFY_FIELDS: tuple[str, ...] = (
    *ID_FIELDS,
    *DATA_FIELDS,
    "refclipscore",
    "clip_score",
    "reference_similarity",
    "accuracy",
    "levenshtein_accuracy",
    "text_similarity",
    "output_scene_similarity",
    "context_captured",
    "empty",
    "scored",
    # the reading and what its selection needs (scoring.reading_rows)
    "reading",
    "dropped",
    "hard_chars",
    "gold_chars",
    "output",
)
#: what identifies one row of a run (an item under one noise setting): each exactly once
ROW_ID_FIELDS: tuple[str, ...] = ID_FIELDS
#: the fields that name a row's view of its item (the noise settings a task scores)
VIEW_FIELDS: tuple[str, ...] = ("noise_area", "noise_level")
#: every row field's type (:func:`lmms_scene.report.submission.row_type_problem`): a closed
#: set; a bool is not a score, a string is not a number, ``scored`` is true or false
ROW_TYPES: dict[str, Any] = {
    "image_id": "str",
    "condition": scoring.CONDITIONS,
    "noise_area": "str",
    "noise_level": "num",
    "scene": "str",
    "target": "str",
    "gold": "str",
    "refclipscore": "num?",
    "clip_score": "num?",
    "reference_similarity": "num?",
    "accuracy": "01?",
    "levenshtein_accuracy": "01?",
    "text_similarity": "num?",
    "output_scene_similarity": "num?",
    "context_captured": "bool?",
    "empty": "bool?",
    "scored": "bool",
    "output": "str",
    "reading": scoring.READINGS,
    "dropped": "str?",
    "hard_chars": "num?",
    "gold_chars": "num?",
}
#: Figures 3-4's metrics and their titles, in order: the table columns the registry declares
#: (lmms_scene/benchmarks.py, ``column``), never copied here
METRICS: tuple[tuple[str, str], ...] = tuple((m.name, m.label) for m in benchmarks.get("cooco").table_metrics())
N_NOTE = "n = naming items (image x noise setting); intervals resample images"
#: metrics drawn at noise level 0 only: the paper's Figure 3 plots the median
#: RefCLIPScore per condition; its Figure 4 the means
FIGURE3_ONLY = frozenset({"refclipscore_median"})


def identity(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The data identity a COOCO report records (:func:`lmms_scene.metrics.rows.dataset_identity`)."""
    return rows_lib.dataset_identity(rows, scoring.ITEM_FIELDS, DATA_FIELDS)


def report_of(result: Any) -> Mapping[str, Any] | None:
    """The breakdown the results hold; for a lone samples file (no results JSON), the one
    its logged rows give (the task's own function over the same rows)."""
    return stored_report(result, REPORT_KEY, "by_condition_noise", scoring.report)


def summary(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The headline cell of one task's report."""
    cell = report.get("overall")
    return cell if isinstance(cell, Mapping) else None


def failures(report: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(counts, reasons): the outputs that were empty or could not be scored; a reason
    makes a run unrankable."""
    stats = report.get("output_statistics") or {}
    counts = {k: stats.get(k) for k in ("n", "n_empty", "n_unscored")}
    reasons = []
    if not isinstance(counts["n"], int) or counts["n_empty"] is None or counts["n_unscored"] is None:
        reasons.append(f"its {REPORT_KEY} does not record how many outputs were empty or unscored")
    elif counts["n_unscored"]:
        reasons.append(f"{counts['n_unscored']} rows could not be scored")
    return counts, reasons


def verification_rows(result: Any) -> list[dict[str, Any]]:
    """The fields of every logged row that the headline and the data identity need."""
    return [{k: r.get(k) for k in VERIFY_FIELDS} for r in result.rows(REPORT_KEY)]


def recompute(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline cell and the data identity from a task's rows (what the task computed)."""
    return {"cell": scoring.overall_cell(rows), "dataset": identity(rows)}


def row_failures(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What makes a run unrankable, counted from its rows (a submission's rows, so the
    leaderboard does not take the counts on trust). Anything but ``scored: true`` is a
    failure (the row types refuse ``null`` before this)."""
    return {
        "n_unscored": sum(1 for r in rows if r.get("scored") is not True),
        "n_empty": sum(1 for r in rows if r.get("empty") is True),
    }


def expected_views(task: str, rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
    """The noise settings every item of ``task`` has a row for: no noise for ``cooco``, the
    paper's areas x levels for a noise task (``cooco_noise``, or a task built from it)."""
    if task == "cooco_noise" or task.startswith("cooco_noise_"):
        return {(a, float(lv)) for a in NOISE_AREAS for lv in NOISE_LEVELS}
    return {(scoring.NO_NOISE_AREA, 0.0)}


def checkpoint_at_hand(name: Any) -> bool:
    """Whether the CLIP checkpoint ``name`` is on this machine (a local folder with its
    config, or in the Hugging Face cache): a leaderboard never downloads one."""
    if not isinstance(name, str) or not name or name.startswith("not computed"):
        return False
    try:
        if Path(name).is_dir():
            return (Path(name) / "config.json").is_file()
    except (OSError, ValueError):
        return False
    try:
        from huggingface_hub import try_to_load_from_cache  # deferred: huggingface_hub is heavy to import

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - not a repo name, no cache: not at hand
        return False


def rederive(
    rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """(problems, notes): each scored row's scores recomputed from its output and gold with
    the task's own functions; a problem names the row, the field, the stated and the
    recomputed value. Levenshtein accuracy and the empty flag need no weights. The CLIP
    text scores (accuracy, text and reference similarity) are recomputed when the checkpoint
    the provenance names is on this machine; RefCLIPScore is checked to be the harmonic mean
    of its parts; CLIP-S needs the images, which a submission does not carry (a note says so)."""
    problems: list[str] = []
    clip_model = (provenance or {}).get("clip_model") or (provenance or {}).get("checkpoint")
    at_hand = checkpoint_at_hand(clip_model)
    notes = ["CLIP-S (image-text cosine, a part of RefCLIPScore) not re-derived: it needs the images"]
    if not at_hand:
        notes.append(
            f"CLIP accuracy and text similarity not re-derived: the checkpoint {clip_model!r} is not on this machine"
        )
    todo = []
    for r in rows:
        if r.get("scored") is not True:
            continue
        where = row_label(r, ID_FIELDS)
        if (r.get("reading") or scoring.CLEANED) != scoring.CLEANED:
            problems.append(
                f"{where}: scored in the {r.get('reading')!r} reading (for comparing with the paper's figures); "
                f"the board ranks the {scoring.CLEANED!r} reading (docs/cooco.md)"
            )
            continue
        # the scorer's own texts of this answer (its gold name: parenthetical stripped)
        texts = scoring._texts(
            {
                "gold": str(r.get("gold") or ""),
                "scene": str(r.get("scene") or ""),
                "target": str(r.get("target") or ""),
            },
            r.get("output") or "",
            scoring.CLEANED,
        )
        empty = texts["empty"]
        lev = 0.0 if empty else scoring.levenshtein_similarity(*texts["lev"])
        want = {"empty": empty, "levenshtein_accuracy": float(lev >= scoring.LEVENSHTEIN_THRESHOLD)}
        if empty:
            want.update(refclipscore=0.0, accuracy=0.0)
        for key, value in want.items():
            if r.get(key) != value:
                problems.append(f"{where}: {key} is {r.get(key)!r} but its output gives {value!r}")
        c, ref, rc = r.get("clip_score"), r.get("reference_similarity"), r.get("refclipscore")
        if not empty and rc is not None:
            if c is None or ref is None or not 0 <= c <= 2.5:
                problems.append(
                    f"{where}: refclipscore {rc!r} without its parts (clip_score {c!r}, reference_similarity {ref!r})"
                )
            else:
                r_pos = max(ref, 0.0)
                hm = 0.0 if c <= 0 or r_pos <= 0 else 2 * c * r_pos / (c + r_pos)
                if abs(hm - rc) > 1e-6:
                    problems.append(f"{where}: refclipscore {rc!r} is not the harmonic mean of its parts ({hm!r})")
        if not empty and at_hand:
            todo.append((where, r, texts))
    if todo:
        sims = clip_metrics.text_similarity(
            [t["long"] for _, _, t in todo], [t["gold_long"] for _, _, t in todo], model=str(clip_model)
        )
        for (where, r, _), sim in zip(todo, sims):
            for key in ("text_similarity", "reference_similarity"):
                if not isinstance(r.get(key), (int, float)) or abs(r[key] - sim) > 1e-4:
                    problems.append(f"{where}: {key} is {r.get(key)!r} but its output gives {sim!r}")
            if abs(sim - scoring.ACCURACY_THRESHOLD) > 1e-4 and r.get("accuracy") != float(
                sim >= scoring.ACCURACY_THRESHOLD
            ):
                problems.append(
                    f"{where}: accuracy is {r.get('accuracy')!r} but its output gives {float(sim >= scoring.ACCURACY_THRESHOLD)!r}"
                )
        notes.append(f"CLIP accuracy and text similarity re-derived with {clip_model}")
    notes.insert(0, "Levenshtein accuracy re-derived from the outputs")
    return problems, notes


# -- tables and figures -----------------------------------------------------------------------


def _cell(grid: Mapping[str, Any], condition: str, area: str, level: str) -> Mapping[str, Any] | None:
    return grid.get(condition, {}).get(area, {}).get(level)


def _scorer(report: Mapping[str, Any]) -> str:
    sc = report.get("scorer") or {}
    clip = sc.get("clip_model") or sc.get("clip_metrics") or "?"
    th = sc.get("thresholds") or {}
    thresholds = ", ".join(f"{k} {v}" for k, v in th.items()) or "none"
    return (
        f"scorer {sc.get('scorer', '?')} (lmms-scene {sc.get('lmms_scene_version', '?')}, normaliser "
        f"{sc.get('normaliser', '?')}; reading {sc.get('reading', '?')}); CLIP {clip}; thresholds: {thresholds}; intervals: "
        f"95% percentile bootstrap over images, {rows_lib.N_BOOT} resamples, seed {rows_lib.SEED}"
    )


def _why(text: str) -> str:
    """The reason in a scorer's ``clip_metrics`` ("not computed: REASON", or the older
    "not computed (ENV=none)")."""
    text = text.removeprefix("not computed").lstrip(" :")
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def reading_line(reading: Mapping[str, Any]) -> str:
    """Which reading computed a report's numbers, and what the authors' reading left out."""
    name = reading.get("reading")
    if isinstance(name, list):
        return f"mixed ({', '.join(map(str, name))}): rows scored in different readings"
    if name != scoring.AUTHORS:
        return f"{name} (lmms-scene's default: parentheticals stripped from golds, empty answers scored 0)"
    return (
        f"authors (LMMS_SCENE_COOCO_READING=authors: their texts, gold spellings and JPEG crop); left out "
        f"{reading.get('dropped_empty')} empty answers and {reading.get('dropped_over_77_clip_tokens')} over 77 CLIP "
        f"tokens, and {reading.get('levenshtein_left_out_longer_than_longest_gold')} answers longer than the longest "
        f"gold ({reading.get('longest_gold_chars')} characters) from the Levenshtein accuracy"
    )


def view(results: Sequence[Any], labels: Mapping[int, str]) -> View:
    """COOCO Figures 3-4, output-scene similarity and context capture, and the output
    counts, for every (model, dataset) in ``results``."""
    out = View("cooco", "COOCO")
    reports: dict[str, list[tuple[Any, Mapping[str, Any]]]] = {}
    for r in results:
        rep = report_of(r)
        if rep is None:
            out.skipped.append(
                (
                    str(r.source),
                    f"task {r.task}: no '{REPORT_KEY}' dict in its metrics (results from another lmms-scene version?)",
                )
            )
            continue
        reports.setdefault(labels[id(r)], []).append((r, rep))
        out.used.append(r)
    if not reports:
        out.notes.append("No COOCO breakdown in these results.")
        return out
    for label, reps in reports.items():
        first = reps[0][0]
        out.runs.append(
            Run(
                label,
                [r.task for r, _ in reps],
                first.model,
                first.model_args,
                short_fingerprint(first.fingerprint),
                sorted({str(r.source) for r, _ in reps}),
                sorted({_scorer(rep) for _, rep in reps}),
                first.limit,
            )
        )
    grids = {m: scoring.merge_reports([rep for _, rep in reps]) for m, reps in reports.items()}
    conditions = list(NAMING_CONDITIONS) + sorted({c for g in grids.values() for c in g} - set(NAMING_CONDITIONS))
    models = list(grids)
    not_computed: dict[str, list[str]] = {}
    for metric, title in METRICS:
        computed = any(
            (lv or {}).get(metric) is not None
            for g in grids.values()
            for a in g.values()
            for lvs in a.values()
            for lv in lvs.values()
        )
        means_computed = any(
            (lv or {}).get("refclipscore") is not None
            for g in grids.values()
            for a in g.values()
            for lvs in a.values()
            for lv in lvs.values()
        )
        if not computed and metric in FIGURE3_ONLY and means_computed:
            out.notes.append(
                f"{title}: not in these results (scored before lmms-scene recorded it; "
                "`lmms-scene rescore` the run to get it)."
            )
            continue
        if not computed:
            why = sorted(
                {
                    _why(str((rep.get("scorer") or {}).get("clip_metrics") or "no value in any cell"))
                    for reps in reports.values()
                    for _, rep in reps
                }
            )
            # one note per reason, naming every metric it stops (not one sentence per CLIP metric)
            not_computed.setdefault("; ".join(why), []).append(title)
            continue
        rows = [[c, *(value_of(_cell(grids[m], c, "none", "0"), metric) for m in models)] for c in conditions]
        out.tables.append(
            Table(
                f"COOCO Figure 3: {title} at noise level 0 ({N_NOTE})",
                ["condition", *models],
                rows,
                slug=f"cooco-figure3-{metric}",
            )
        )
        out.plots.append(
            Plot(
                f"COOCO Figure 3: {title} by relatedness (no noise), 95% intervals",
                "grouped_bars",
                {
                    "groups": conditions,
                    "series": {m: [row[1 + i] for row in rows] for i, m in enumerate(models)},
                    "title": f"{title} at noise level 0",
                    "ylabel": title.split(" (")[0],
                },
            )
        )
        for m in models:
            if metric in FIGURE3_ONLY:
                break
            g = grids[m]
            areas = [a for a in ("context", "target", "all") if any(a in g.get(c, {}) for c in conditions)]
            if not areas:
                continue
            settings = scoring.FIGURE4_SETTINGS
            header = ["condition", *("no noise" if a == "none" else f"{a} {lv}" for a, lv in settings)]
            rows4 = [[c, *(value_of(_cell(g, c, a, lv), metric) for a, lv in settings)] for c in conditions]
            out.tables.append(
                Table(
                    f"COOCO Figure 4: {title} by relatedness x noise area x level ({m}; {N_NOTE})",
                    header,
                    rows4,
                    slug=f"cooco-figure4-{metric}-{m}",
                )
            )
            panels = {
                a: {
                    c: [
                        (0.0, value_of(_cell(g, c, "none", "0"), metric)),
                        *((float(lv), value_of(_cell(g, c, a, lv), metric)) for lv in ("0.5", "1")),
                    ]
                    for c in conditions
                }
                for a in areas
            }
            out.plots.append(
                Plot(
                    f"COOCO Figure 4: {title} by noise area and level ({m}), 95% intervals",
                    "level_lines",
                    {"panels": panels, "title": f"{title} ({m})", "ylabel": title.split(" (")[0]},
                )
            )
    for why, titles in not_computed.items():
        names = sorted(titles, key=str.lower)
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        whose = "Its" if len(names) == 1 else "Their"
        out.notes.append(f"{listed}: not computed in these results: {why}. {whose} tables and figures are left out.")
    header = ["condition"]
    for m in models:
        header += [f"{m} output-scene similarity", f"{m} context capture"]
    rows = []
    for c in conditions:
        line: list[Any] = [c]
        for m in models:
            cl = _cell(grids[m], c, "none", "0")
            line += [value_of(cl, "output_scene_similarity"), value_of(cl, "context_capture_rate")]
        rows.append(line)
    if any(isinstance(v, Value) for row in rows for v in row[1:]):
        out.tables.append(
            Table(
                f"COOCO: output-scene similarity and context-capture rate at noise level 0 ({N_NOTE})",
                header,
                rows,
                slug="cooco-scene-capture",
            )
        )
    else:
        out.notes.append("Output-scene similarity and context capture: not computed in these results (they need CLIP).")
    capture = []
    for m, reps in reports.items():
        rep = reps[0][1]
        if rep.get("context_capture_rate") is not None and rep.get("context_capture_rate_among_wrong") is not None:
            capture.append(
                f"{m}: {rep['context_capture_rate']:.3f} of incongruent answers "
                f"({rep['context_capture_rate_among_wrong']:.3f} of the wrong ones)"
            )
    if capture:
        out.notes.append(
            "Context capture (the answer closer to the original target than to the gold): " + "; ".join(capture)
        )
    chosen = sorted(
        {
            f"{m}: {scoring.selection_line(rep['selection'])}"
            for m, reps in reports.items()
            for _, rep in reps
            if isinstance(rep.get("selection"), Mapping)
        }
    )
    if chosen:
        out.notes.append("Selection: " + "; ".join(chosen))
    readings = sorted(
        {
            f"{m}: {reading_line(rep.get('reading'))}"
            for m, reps in reports.items()
            for _, rep in reps
            if isinstance(rep.get("reading"), Mapping)
        }
    )
    if readings:
        out.notes.append("Reading: " + "; ".join(readings))
    stats = []
    for m, reps in reports.items():
        for r, rep in reps:
            st = rep.get("output_statistics") or {}
            stats.append(
                [
                    m,
                    r.task,
                    st.get("n"),
                    st.get("n_empty"),
                    st.get("n_verbose"),
                    st.get("n_unscored"),
                    rep.get("n_duplicate_rows_dropped"),
                ]
            )
            if note := unscored_note(
                f"{m} ({r.task})",
                st.get("n_unscored"),
                st.get("unscored"),
                ("image_id", "condition", "noise_area", "noise_level"),
            ):
                out.notes.append(note)
    out.tables.append(
        Table(
            "COOCO: outputs (every one scored; unscored rows are counted, never zeros)",
            ["model", "task", "n", "empty", "verbose", "unscored", "duplicates dropped"],
            stats,
            slug="cooco-outputs",
            key_columns=2,
        )
    )
    return out
