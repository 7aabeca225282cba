"""The public CESG API: :func:`cesg_score`, :func:`cesg_graph`, :func:`score_corpus`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lmms_scene import provenance as _provenance
from lmms_scene import settings
from lmms_scene.judges import parse_judges
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.cesg import construct as _construct
from lmms_scene.metrics.cesg.construct import (
    Construction,
    Pipeline,
    combine,
    fork_map,
    fork_workers,
)
from lmms_scene.metrics.cesg.construct import (
    pipeline as _pipeline,
)
from lmms_scene.metrics.cesg.graph import CESG
from lmms_scene.metrics.cesg.judges import ExtraJudges, SynonymVerifier
from lmms_scene.metrics.cesg.match import (
    DEFAULT_LAMBDA,
    DEFAULT_WEIGHTS,
    TYPES,
    Options,
    elements,
    f1,
    match,
    scores,
    verbalise,
    weighted,
)
from lmms_scene.nlp.encoders import sentence_encoder
from lmms_scene.progress import progress
from lmms_scene.validation import texts

#: the score keys, in Table 2's order within CESG
KEYS = ("P_o", "R_o", "F1_o", "P_a", "R_a", "F1_a", "P_r", "R_r", "F1_r", "CESG")

#: row statuses
SCORED = "scored"
EMPTY_PREDICTION = "empty_prediction"
NO_ABSENT_PREDICTION = "prediction_without_absent_information"
NO_ABSENT_REFERENCE = "reference_without_absent_information"

_OPTIONS = {
    "pipeline",
    "coref",
    "parser",
    "encoder",
    "lambda_",
    "weights",
    "synonyms",
    "interactive",
    "soft",
    "verifier",
    "extra_judge",
    "device",
}


def _resolve(options: dict[str, Any]) -> tuple[Pipeline, Options, dict[str, Any]]:
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"cesg_score: unknown options {unknown}; known: {sorted(_OPTIONS)}")
    pipe = options.get("pipeline") or _pipeline(
        options.get("coref", "rule"), options.get("parser", "rule"), options.get("device")
    )
    lam = float(options.get("lambda_", DEFAULT_LAMBDA))
    if not 0.0 <= lam <= 1.0:  # (NaN fails this too)
        raise ValueError(f"lambda_: expected a similarity threshold in [0, 1], got {lam!r}")
    weights = tuple(float(w) for w in options.get("weights", DEFAULT_WEIGHTS))
    if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(
            f"weights: expected three non-negative (w_o, w_a, w_r) with a positive sum, got {options.get('weights')!r}"
        )
    enc = options.get("encoder", "default")
    interactive, soft = bool(options.get("interactive", True)), bool(options.get("soft", True))
    if enc is None:
        encoder = None
    elif isinstance(enc, str):
        encoder = (
            sentence_encoder(None if enc == "default" else enc, options.get("device"))
            if (interactive or soft)
            else None
        )
    else:
        encoder = enc
    opts = Options(
        lambda_=lam,
        weights=weights,  # type: ignore[arg-type]
        use_synonyms=bool(options.get("synonyms", True)),
        interactive=interactive,
        soft=soft,
        verifier=options.get("verifier"),
        extra_judge=options.get("extra_judge"),
        encoder=encoder,
    )
    return pipe, opts, describe(pipe, opts)


#: the keys of a components setting (``LMMS_SCENE_CESG``) and the cesg_score option each sets
COMPONENT_KEYS = {
    "coref": "coref",
    "parser": "parser",
    "encoder": "encoder",
    "lambda": "lambda_",
    "weights": "weights",
    "synonyms": "synonyms",
    "interactive": "interactive",
    "soft": "soft",
    "extra": "extra_judge",
    "verifier": "verifier",
    "device": "device",
}


def parse_components(spec: str | None) -> dict[str, Any]:
    """``cesg_score`` options from a components setting: ``key=value`` pairs separated by
    ``;``, e.g. ``coref=lingmess;parser=discosg;encoder=simcse;lambda=0.7;extra=gpt=gpt-4o@https://...``.
    ``weights`` is ``w_o,w_a,w_r``; ``synonyms``/``interactive``/``soft`` are on/off;
    ``extra`` and ``verifier`` are judge specs (:func:`lmms_scene.judges.parse_judges`).
    The pairs are read by :func:`lmms_scene.settings.cesg_fields` (the one reader of
    ``LMMS_SCENE_CESG``: each key once and known, each value checked); errors name the key
    and the value."""
    out: dict[str, Any] = {}
    for key, value in settings.cesg_fields(spec or "", "CESG components").items():
        option = COMPONENT_KEYS[key]
        if key == "lambda":
            out[option] = settings.parse_unit(value, "CESG components: lambda")
        elif key == "weights":
            out[option] = settings.parse_weights(value, "CESG components: weights")[0]
        elif key in ("synonyms", "interactive", "soft"):
            out[option] = settings.parse_switch(value, f"CESG components: {key}")
        elif key in ("extra", "verifier"):
            judges = parse_judges(value)
            if len(judges) != 1:
                raise ValueError(f"CESG components: {key}={value!r}: expected one judge, got {len(judges)}")
            out[option] = ExtraJudges(judges[0]) if key == "extra" else SynonymVerifier(judges[0])
        elif key == "encoder":
            out[option] = None if value.lower() == "none" else value
        else:
            out[option] = value
    return out


def describe(pipe: Pipeline, opts: Options) -> dict[str, Any]:
    """Provenance of a CESG configuration: every component and threshold."""
    return _provenance.scorer(
        "cesg",
        **pipe.provenance(),
        **(opts.encoder.provenance if opts.encoder is not None else {"similarity_model": None}),
        wordnet_synonyms=opts.use_synonyms,
        synonym_verifier=getattr(opts.verifier, "provenance", getattr(opts.verifier, "name", "callable"))
        if opts.verifier
        else None,
        interactive_matching=opts.interactive and opts.encoder is not None,
        interactive_lambda=opts.lambda_,
        extra_matching=getattr(opts.extra_judge, "provenance", "on") if opts.extra_judge else "off",
        anchored_soft_matching="an attribute or relation anchored to another entity of the reference gets no soft or interactive credit",
        corpus_convention="P_t/R_t means over rows whose prediction/reference has a type-t element; F1_t = HM; CESG = weighted F1s over the types present",
        soft_matching=opts.soft and opts.encoder is not None,
        weights={"w_o": opts.weights[0], "w_a": opts.weights[1], "w_r": opts.weights[2]},
    )


def cesg_graph(text: str, **options: Any) -> Construction:
    """Every stage's output for ``text`` (resolved text, sentences, affirmative sentences,
    sentence-level and scene-level CESG, failures), for inspection."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    pipe = options.get("pipeline") or _pipeline(
        options.get("coref", "rule"), options.get("parser", "rule"), options.get("device")
    )
    return pipe.construct(text)


def reference_graph(pipe: Pipeline, references: Sequence[str]) -> CESG:
    """The scene-level CESG of several references (stage VI over all of them)."""
    graphs = [pipe.build(r) for r in references]
    return graphs[0] if len(graphs) == 1 else combine(graphs, [f for g in graphs for f in g.failures])


def _nothing_claimed(gt: CESG, weights: Sequence[float]) -> dict[str, Any]:
    """A prediction with no absent information: P undefined, R = F1 = 0 for every type
    the reference has, CESG 0."""
    G = elements(gt)
    out: dict[str, Any] = {}
    for t in TYPES:
        r = 0.0 if G[t] else None
        out[f"P_{t}"], out[f"R_{t}"], out[f"F1_{t}"] = None, r, f1(None, r)
    out["CESG"] = weighted([out[f"F1_{t}"] for t in TYPES], weights)
    return out


def _score(pipe: Pipeline, opts: Options, prediction: str, references: list[str]) -> dict[str, Any]:
    gt = reference_graph(pipe, references)
    failures = list(gt.failures)
    if not gt.has_absent_information():
        return {
            **{k: None for k in KEYS},
            "status": NO_ABSENT_REFERENCE,
            "parse_failures": [f.to_json() for f in failures],
        }
    if not prediction.strip():
        return {
            **_nothing_claimed(gt, opts.weights),
            "status": EMPTY_PREDICTION,
            "parse_failures": [f.to_json() for f in failures],
        }
    pred = pipe.build(prediction)
    failures += pred.failures
    if not pred.has_absent_information():
        # the paper's AC row: no absent information claimed scores 0 on every dimension
        return {
            **_nothing_claimed(gt, opts.weights),
            "status": NO_ABSENT_PREDICTION,
            "parse_failures": [f.to_json() for f in failures],
        }
    opts.judge_failures = []
    judge = opts.extra_judge
    if judge is not None and hasattr(judge, "for_reference"):
        # a judge that sees each row's reference (the task's extra matching)

        opts = replace(opts, extra_judge=judge.for_reference(" ".join(references)), judge_failures=opts.judge_failures)
    out: dict[str, Any] = scores(match(pred, gt, opts), opts.weights)
    out["status"] = SCORED
    out["parse_failures"] = [f.to_json() for f in failures]
    if opts.judge_failures:
        out["judge_failures"] = list(opts.judge_failures)
    return out


def cesg_score(prediction: str, references: str | list[str], **options: Any) -> dict[str, Any]:
    """CESG of one prediction against its reference caption(s).

    Returns ``P_o, R_o, F1_o, P_a, R_a, F1_a, P_r, R_r, F1_r, CESG`` (floats in [0, 1]),
    plus ``status`` (``scored``; ``empty_prediction`` and
    ``prediction_without_absent_information`` score 0; ``reference_without_absent_information``
    gives None everywhere: such a reference cannot grade anything and is excluded from
    means) and ``parse_failures`` (sentences a stage could not process).

    Options: ``coref`` ("rule" | "lingmess"), ``parser`` ("rule" | "factual"), ``pipeline``
    (a :class:`Pipeline`), ``encoder`` (None: no similarity stages; a name for
    :func:`lmms_scene.nlp.encoders.sentence_encoder`), ``lambda_``, ``weights``,
    ``synonyms``, ``interactive``, ``soft``, ``verifier`` (Q_v: (x, y) -> bool | None),
    ``extra_judge`` (Q_e: x -> bool | None), ``device``.

    >>> s = cesg_score("There is no guardrail.", "There is no guardrail.")  # doctest: +SKIP
    >>> s["CESG"]  # doctest: +SKIP
    1.0
    """
    if not isinstance(prediction, str):
        raise TypeError(f"prediction: expected a string, got {type(prediction).__name__}: {prediction!r}")
    refs = texts(references, "references", allow_empty=False)
    pipe, opts, _ = _resolve(dict(options))
    return _score(pipe, opts, prediction, refs)


def configuration(**options: Any) -> dict[str, Any]:
    """The provenance record :func:`cesg_score` would use with ``options`` (loads them)."""
    return _resolve(dict(options))[2]


#: (pipeline, options) a forked child matches rows with (set by the parent before forking)
_FORKED_MATCH: Any = None


def _match_share(share: list[tuple[Any, str, list[str]]]) -> list[dict[str, Any]]:
    pipe, opts = _FORKED_MATCH
    return [{"id": row_id, **_score(pipe, opts, prediction, refs)} for row_id, prediction, refs in share]


def phrases_of(graphs: Sequence[CESG]) -> list[str]:
    """Every verbalised element of ``graphs``, sorted (what the similarity stages embed)."""
    return sorted({verbalise(e) for g in graphs for items in elements(g).values() for e in items})


def score_corpus(pairs: Sequence[tuple[str, str, Sequence[str]]], **options: Any) -> dict[str, Any]:
    """Score ``(id, prediction, references)`` triples: per-row scores, the corpus scores in
    the paper's convention (:func:`corpus_scores`, under ``means``) with the number of rows
    behind each mean (``row_counts``), counts of excluded references, empty predictions
    and parse failures, and the provenance.

    ``workers``: processes to use (default ``"auto"``: the available CPUs, up to 4, for a
    corpus of at least :data:`~lmms_scene.metrics.cesg.construct.PARALLEL_MIN` pairs when the
    offline pipeline is used and no other thread runs; ``1``: this process only). The
    graphs are built and the rows matched in forked processes; the phrases are embedded
    here in one call, so every score equals the single-process one."""
    options = dict(options)
    workers = options.pop("workers", "auto")
    pipe, opts, prov = _resolve(options)
    # build every graph first, in batches (coref and parser batched across texts)
    n_build = fork_workers(workers, len(pairs))
    try:
        graphs = pipe.build_many(
            [t for _, p, refs in pairs for t in (p, *texts(refs, "references")) if isinstance(t, str)], workers=n_build
        )
    except TypeError:
        graphs = []  # a malformed row: the loop below names it
    phrases = phrases_of(graphs) if graphs else []
    if opts.encoder is not None and (opts.interactive or opts.soft) and graphs:
        # every phrase the similarity stages may need, embedded in one batched call (one
        # call per pair would run the encoder on a few phrases at a time)

        opts.encoder.encode(phrases[:100_000])
    rows = []
    checked = []
    for i, (row_id, prediction, refs) in enumerate(pairs):
        if not isinstance(prediction, str):
            raise TypeError(
                f"row {i} (id {row_id!r}): prediction: expected a string, got {type(prediction).__name__}: {prediction!r}"
            )
        checked.append((row_id, prediction, texts(refs, f"row {i} (id {row_id!r}): references", allow_empty=False)))
    # matching in forked processes needs every phrase embedded here first (a child runs no
    # model) and no judge (each judge call is a request this process keeps count of)
    n_match = (
        n_build
        if (
            pipe.forkable
            and opts.verifier is None
            and opts.extra_judge is None
            and graphs
            and len(checked) >= 2 * n_build
            and (opts.encoder is None or len(phrases) < _construct.cache.MEMO_SIZE // 2)
        )
        else 1
    )
    if n_match > 1:
        global _FORKED_MATCH
        _FORKED_MATCH = (pipe, opts)
        try:
            step = -(-len(checked) // n_match)
            for part in fork_map(_match_share, [checked[k : k + step] for k in range(0, len(checked), step)]):
                rows.extend(part)
        finally:
            _FORKED_MATCH = None
    else:
        for row_id, prediction, refs in progress(checked, "CESG", unit="pair"):
            rows.append({"id": row_id, **_score(pipe, opts, prediction, refs)})
    corpus = corpus_scores(rows, opts.weights)
    return {
        "rows": rows,
        "means": {k: corpus[k] for k in KEYS},
        "row_counts": corpus["counts"],
        "n": len(rows),
        "n_scored": sum(r["status"] != NO_ABSENT_REFERENCE for r in rows),
        "n_reference_without_absent_information": sum(r["status"] == NO_ABSENT_REFERENCE for r in rows),
        "n_empty_prediction": sum(r["status"] == EMPTY_PREDICTION for r in rows),
        "n_prediction_without_absent_information": sum(r["status"] == NO_ABSENT_PREDICTION for r in rows),
        "n_parse_failures": sum(len(r["parse_failures"]) for r in rows),
        "provenance": prov,
    }


def corpus_scores(
    rows: Sequence[Mapping[str, Any]],
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    cluster: str | None = None,
    *,
    n_boot: int = 0,
    seed: int | None = None,
) -> dict[str, Any]:
    """The paper's corpus convention (Table 2: in every row F1 is the harmonic mean of the
    reported P and R). Per type t: P_t = mean of the rows' P_t over rows whose prediction
    has an element of type t (0 when none has), R_t = mean over rows whose reference has
    one, F1_t = HM(P_t, R_t) (None when no row has the type on either side, 0 when only
    predictions have it), CESG = weighted F1s over the types with an F1.

    ``counts`` gives the rows behind each mean (``P_o``: rows with a predicted object...).
    With ``n_boot`` > 0, ``ci95`` holds seeded percentile-bootstrap intervals, rows resampled
    by ``cluster`` (each row its own cluster when None)."""
    rows = [r for r in rows if r.get("status") != NO_ABSENT_REFERENCE]
    out: dict[str, Any] = {"counts": {}}
    columns = {}
    for t in TYPES:
        for side in ("P", "R"):
            values = [r.get(f"{side}_{t}") for r in rows]
            columns[f"{side}_{t}"] = values
            out["counts"][f"{side}_{t}"] = sum(v is not None for v in values)
    point = _derive({k: rows_lib.mean(v) for k, v in columns.items()}, weights)
    out.update(point)
    if n_boot > 0 and rows:
        clusters = [r.get(cluster) for r in rows] if cluster else None
        kw = {"n_boot": n_boot} if seed is None else {"n_boot": n_boot, "seed": seed}
        dists = rows_lib.bootstrap_means(columns, clusters, **kw)
        derived = _derive_arrays(dists, weights)
        out["ci95"] = {k: rows_lib.percentile_interval(derived[k]) for k in KEYS}
    return out


def _derive(means: Mapping[str, float | None], weights: Sequence[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for t in TYPES:
        p, r = means[f"P_{t}"], means[f"R_{t}"]
        if p is None and r is not None:
            p = 0.0  # no row claims this type: P_t = 0 (the affirmative caption scores 0)
        out[f"P_{t}"], out[f"R_{t}"], out[f"F1_{t}"] = p, r, f1(p, r)
    out["CESG"] = weighted([out[f"F1_{t}"] for t in TYPES], weights)
    return out


def _derive_arrays(dists: Mapping[str, Any], weights: Sequence[float]) -> dict[str, Any]:
    """:func:`_derive` on bootstrap distributions (NaN: no row of that kind was drawn)."""
    out: dict[str, Any] = {}
    f1s = []
    for t in TYPES:
        p, r = np.array(dists[f"P_{t}"], dtype=float), np.array(dists[f"R_{t}"], dtype=float)
        p = np.where(np.isnan(p) & ~np.isnan(r), 0.0, p)
        with np.errstate(invalid="ignore", divide="ignore"):
            hm = np.where(p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1), 0.0)
        f = np.where(np.isnan(p) & np.isnan(r), np.nan, np.where(np.isnan(p) | np.isnan(r), 0.0, hm))
        out[f"P_{t}"], out[f"R_{t}"], out[f"F1_{t}"] = p, r, f
        f1s.append(f)
    w = np.asarray(weights, dtype=float)[:, None]
    stack = np.vstack(f1s)
    defined = ~np.isnan(stack)
    total = (w * defined).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["CESG"] = np.where(
            total > 0, (w * np.nan_to_num(stack)).sum(axis=0) / np.where(total > 0, total, 1), np.nan
        )
    return out
