"""SNUS's results, read once: the headline cell, the failures that make a run unrankable,
the rows a submission carries for verification, and Table 2 with the rows behind each
CESG mean, for ``lmms-scene show``, the HTML report, ``report.md`` and the CSV files.

Numbers come from the ``snus_report`` the task wrote (the model's scores and the AC row,
means with 95% intervals over images, pycocoevalcap's corpus scores); nothing is
recomputed here except by :func:`recompute`, which the leaderboard uses to check a
submission's CESG against its own per-row P/R with the function the task used
(:func:`lmms_scene.metrics.cesg.score.corpus_scores`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.cesg import score as cesg_score_lib
from lmms_scene.metrics.cesg.score import DEFAULT_WEIGHTS, KEYS
from lmms_scene.metrics.cesg.score import corpus_scores as convention
from lmms_scene.metrics.snus import scoring as snus_report
from lmms_scene.report.tables import Run, Table, Value, View, row_label, unscored_note
from lmms_scene.results import short_fingerprint, stored_report

REPORT_KEY = benchmarks.get("snus").report_key
#: what identifies an item of the dataset, and its gold fields (the data fingerprint's)
ITEM_FIELDS = snus_report.ID_FIELDS
DATA_FIELDS = snus_report.DATA_FIELDS
VERIFY_FIELDS: tuple[str, ...] = ("image_id", "references", *KEYS, "status", "output")
ROW_ID_FIELDS: tuple[str, ...] = snus_report.ID_FIELDS
VIEW_FIELDS: tuple[str, ...] = ()
#: a row's status: one of the scorer's outcomes, or a failure ("unscored", or the task's
#: "not scored here: ..." when process_results could not score it); nothing else
STATUSES: tuple[str, ...] = (
    cesg_score_lib.SCORED,
    cesg_score_lib.EMPTY_PREDICTION,
    cesg_score_lib.NO_ABSENT_PREDICTION,
    cesg_score_lib.NO_ABSENT_REFERENCE,
    "unscored",
)
FAILED_PREFIX = "not scored here: "


def _status(value: Any) -> bool:
    return value in STATUSES or (isinstance(value, str) and value.startswith(FAILED_PREFIX))


ROW_TYPES: dict[str, Any] = {
    "image_id": "str",
    "references": "str[]",
    **{k: "num?" for k in KEYS},
    "status": _status,
    "output": "str",
}
AC_LABEL = "AC (references, negation stripped)"
CONVENTION = (
    "CESG in the paper's convention: P_t is the mean over rows whose prediction states a type-t element, "
    "R_t over rows whose reference does, F1_t = 2 P_t R_t / (P_t + R_t) of those means, CESG = 0.5 F1_o + "
    "0.25 F1_a + 0.25 F1_r (a type no row has is left out). BL4, METEOR-J and CID are pycocoevalcap's scores "
    "of the whole split (no interval); MET is NLTK's METEOR (the paper's MET), METEOR-J pycocoevalcap's Java "
    "METEOR 1.5. x100; n = images scored; intervals resample images."
)


def identity(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return rows_lib.dataset_identity(rows, snus_report.ID_FIELDS, snus_report.DATA_FIELDS)


def report_of(result: Any) -> Mapping[str, Any] | None:
    return stored_report(result, REPORT_KEY, "model")


def summary(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The model's headline cell (CESG and its F1s with intervals, n = images scored)."""
    model = report.get("model") or {}
    cell = model.get("summary")
    if not isinstance(cell, Mapping):
        return None
    out = dict(cell)
    n = (model.get("counts") or {}).get("n_scored")
    if isinstance(n, int):
        out["n"] = n
    return out


def failures(report: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(counts, reasons): empty outputs, rows that could not be scored, judge failures,
    and CESG weights other than the paper's (a different metric, not the benchmark)."""
    model = report.get("model") or {}
    c = model.get("counts") or {}
    # rows that could not be scored are left out of the model's corpus: the report counts them
    counts = {
        "n": c.get("n"),
        "n_empty": c.get("n_empty_prediction"),
        "n_unscored": report.get("n_unscored", c.get("n_unscored", 0)),
    }
    counts.update({k: v for k, v in c.items() if isinstance(v, (int, float)) and k not in counts})
    reasons = []
    if not isinstance(counts["n"], int) or counts["n_empty"] is None:
        reasons.append(f"its {REPORT_KEY} does not record how many outputs were empty")
    if counts["n_unscored"]:
        reasons.append(f"{counts['n_unscored']} rows could not be scored")
    if c.get("n_judge_failures"):
        reasons.append(f"{c['n_judge_failures']} CESG judge failures")
    weights = ((model.get("provenance") or {}).get("cesg") or {}).get("weights")
    if isinstance(weights, Mapping) and tuple(float(weights.get(k, -1)) for k in ("w_o", "w_a", "w_r")) != tuple(
        DEFAULT_WEIGHTS
    ):
        reasons.append(
            f"CESG weights {dict(weights)} are not the paper's {tuple(DEFAULT_WEIGHTS)}: another metric, not the benchmark's"
        )
    return counts, reasons


def verification_rows(result: Any) -> list[dict[str, Any]]:
    """Every logged row's ids, references and per-row CESG parts (the headline's inputs)."""
    out = []
    for r in result.rows(REPORT_KEY):
        scores = r.get("scores") if isinstance(r.get("scores"), Mapping) else {}
        out.append(
            {
                "image_id": r.get("image_id"),
                "references": r.get("references"),
                **{k: scores.get(k) for k in (*KEYS, "status")},
                "output": r.get("output"),
            }
        )
    return out


def recompute(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline cell (the paper's corpus convention, intervals over images) and the
    data identity from a run's per-row P/R."""
    unique = rows_lib.dedupe(rows, snus_report.ID_FIELDS, same=()).rows
    # as the stored corpus: rows recorded unscored are left out of the means (and counted)
    conv = corpus_scores([r for r in unique if r.get("status") != "unscored"])
    cell = {k: conv[k] for k in KEYS if conv.get(k) is not None}
    cell["ci95"] = {k: v for k, v in (conv.get("ci95") or {}).items() if conv.get(k) is not None}
    return {"cell": cell, "dataset": identity(unique)}


def corpus_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return convention(rows, DEFAULT_WEIGHTS, cluster="image_id", n_boot=rows_lib.N_BOOT, seed=rows_lib.SEED)


def row_failures(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What makes a run unrankable, counted from its rows: any status that is not one of
    the scorer's outcomes is a failure (the row types refuse unknown ones before this)."""
    outcomes = set(STATUSES) - {"unscored"}
    return {
        "n_empty": sum(1 for r in rows if r.get("status") == cesg_score_lib.EMPTY_PREDICTION),
        "n_unscored": sum(1 for r in rows if r.get("status") not in outcomes),
    }


def expected_views(task: str, rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
    """One row per image."""
    return {()}


def rederive(
    rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """(problems, notes): every scored row's status, P/R/F1 and CESG recomputed from its
    output and references with CESG's offline pipeline (the task's own function and
    options); a problem names the row, the field, the stated and the recomputed value."""
    options = snus_report.cesg_options()
    problems: list[str] = []
    for r in rows:
        if r.get("status") not in STATUSES or r.get("status") == "unscored":
            continue
        where = row_label(r, ROW_ID_FIELDS)
        try:
            again = cesg_score_lib.cesg_score(str(r.get("output") or ""), list(r.get("references") or []), **options)
        except Exception as exc:  # noqa: BLE001 - a hostile output must cost its row, not the board
            problems.append(f"{where}: its output cannot be scored again ({type(exc).__name__}: {exc})")
            continue
        if again.get("status") != r.get("status"):
            problems.append(f"{where}: status is {r.get('status')!r} but its output gives {again.get('status')!r}")
            continue
        for k in KEYS:
            a, b = r.get(k), again.get(k)
            if (a is None) != (b is None) or (a is not None and abs(float(a) - float(b)) > 1e-4):
                problems.append(f"{where}: {k} is {a!r} but its output gives {b!r}")
    return problems, [
        "CESG re-derived from the outputs with the offline pipeline (parser, coreference and similarity of "
        "this lmms-scene)"
    ]


# -- Table 2 ----------------------------------------------------------------------------------


def _value(part: Mapping[str, Any], key: str) -> Value | None:
    if key in snus_report.CORPUS_LEVEL:
        v = (part.get("corpus") or {}).get(key)
        return None if v is None else Value(float(v), None, None, scale=100)
    cell = part.get("summary") or {}
    v = cell.get(key)
    if v is None:
        return None
    ci = (cell.get("ci95") or {}).get(key) if isinstance(cell.get("ci95"), Mapping) else None
    return Value(float(v), list(ci) if ci else None, None, scale=100)


def _components(prov: Mapping[str, Any]) -> str:
    cp = prov.get("cesg") or {}
    clip = prov.get("clipscore")
    clip_line = (
        f"CLIPScore = {clip.get('formula')} with {clip.get('clip_model')}"
        if isinstance(clip, Mapping)
        else str(clip or snus_report.CLIPSCORE_OFF)
    )
    return (
        f"CESG with coref = {cp.get('coref')}; parser = {cp.get('parser')} ({cp.get('spacy_model')} "
        f"{cp.get('spacy_model_version')}); similarity = {cp.get('similarity_model')}; lambda = {cp.get('interactive_lambda')}; "
        f"extra matching {cp.get('extra_matching')}; weights {cp.get('weights')}. ROU/CID/BL4/METEOR-J: "
        f"{(prov.get('bleu4') or {}).get('implementation', 'pycocoevalcap')} with the PTB tokenizer; MET: "
        f"{(prov.get('meteor_nltk') or {}).get('implementation')}. CAP* = CAPTURE-style reimplementation (soft match: "
        f"{(prov.get('capture_style') or {}).get('soft_match_model')}); SPI* = SPICE-style tuple F1 reimplementation "
        f"(not Java SPICE). CS: {clip_line}."
    )


def table2(entries: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    """Table 2 for ``(label, part)`` entries (a part: a report's ``model`` or ``ac`` dict): x100,
    mean [95% CI over images], n = images scored; CESG and its F1s first, then the paper's
    columns. ``show``, the HTML report and ``lmms-scene snus-ac`` print this one table."""
    # the table columns the registry declares (lmms_scene/benchmarks.py, ``column``/``heading``)
    columns = [(m.name, m.column_heading) for m in benchmarks.get("snus").table_metrics()]
    header = ["Method", "n", *(h for _, h in columns)]
    rows = [
        [label, (part.get("counts") or {}).get("n_scored"), *(_value(part, k) for k, _ in columns)]
        for label, part in entries
    ]
    return Table(
        "SNUS Table 2 (x100; mean [95% CI over images]; headline first, the paper's columns after)",
        header,
        rows,
        [CONVENTION],
        slug="snus-table2",
        key_columns=6,
    )


def view(results: Sequence[Any], labels: Mapping[int, str]) -> View:
    """Table 2 per (model, dataset) plus the AC row of each dataset, the rows behind each
    CESG mean, the outcome counts and the components that computed every column."""
    out = View("snus", "SNUS")
    entries: list[tuple[str, Mapping[str, Any]]] = []
    acs: dict[str, tuple[str, Mapping[str, Any]]] = {}
    counts = []
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
        label = labels[id(r)]
        out.used.append(r)
        entries.append((f"{label} ({r.task})", rep["model"]))
        if isinstance(rep.get("ac"), Mapping):
            acs.setdefault(str(r.fingerprint), (label, rep["ac"]))
        # rows that could not be scored are left out of the corpus; the report counts and names them
        mc = rep["model"].get("counts") or {}
        counts.append((label, r.task, {**mc, "n_unscored": rep.get("n_unscored", mc.get("n_unscored", 0))}))
        if note := unscored_note(f"{label} ({r.task})", rep.get("n_unscored"), rep.get("unscored"), ("image_id",)):
            out.notes.append(note)
        prov = rep["model"].get("provenance") or {}
        out.runs.append(Run.of(r, label, [_components(prov)] if prov else []))
    if not entries:
        out.notes.append("No SNUS report in these results (give the results JSON of a snus task).")
        return out
    several = len(acs) > 1
    for fp, (_label, ac) in acs.items():
        entries.append((f"{AC_LABEL} [data {short_fingerprint(fp)}]" if several else AC_LABEL, ac))
    # the headline first (CESG and its F1s), then P/R, then the lexical baselines CESG must beat
    out.tables.append(table2(entries))
    keys = [f"{side}_{t}" for t in ("o", "r", "a") for side in ("P", "R")]
    behind = [
        [
            label,
            (part.get("counts") or {}).get("n_scored"),
            *(((part.get("counts") or {}).get("cesg_rows") or {}).get(k) for k in keys),
        ]
        for label, part in entries
    ]
    out.tables.append(
        Table(
            "SNUS: rows behind each CESG mean (P_t: rows whose prediction states a type-t element; "
            "R_t: rows whose reference does)",
            ["Method", "n", *keys],
            behind,
            slug="snus-cesg-rows",
        )
    )
    outcome = [
        [
            label,
            task,
            c.get("n"),
            c.get("n_scored"),
            c.get("n_reference_without_absent_information"),
            c.get("n_empty_prediction"),
            c.get("n_prediction_without_absent_information"),
            c.get("n_parse_failures"),
            c.get("n_unscored", 0),
        ]
        for label, task, c in counts
    ]
    out.tables.append(
        Table(
            "SNUS: outcomes (every row counted; empty outputs and outputs stating no absence score 0)",
            [
                "model",
                "task",
                "rows",
                "scored",
                "references without absent information (excluded)",
                "empty outputs",
                "outputs with no absent information",
                "sentences that failed to parse",
                "unscored",
            ],
            outcome,
            slug="snus-outcomes",
            key_columns=2,
        )
    )
    return out
