"""The public CESG API: :func:`cesg_score`, :func:`cesg_graph`, :func:`score_corpus`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from lmms_scene import provenance as _provenance
from lmms_scene.metrics.cesg.construct import Construction, Pipeline, combine, pipeline as _pipeline
from lmms_scene.metrics.cesg.graph import CESG
from lmms_scene.metrics.cesg.match import DEFAULT_LAMBDA, DEFAULT_WEIGHTS, Options, match, scores
from lmms_scene.validation import texts

#: the score keys, in Table 2's order within CESG
KEYS = ("P_o", "R_o", "F1_o", "P_a", "R_a", "F1_a", "P_r", "R_r", "F1_r", "CESG")

#: row statuses
SCORED = "scored"
EMPTY_PREDICTION = "empty_prediction"
NO_ABSENT_PREDICTION = "prediction_without_absent_information"
NO_ABSENT_REFERENCE = "reference_without_absent_information"

_OPTIONS = {"pipeline", "coref", "parser", "encoder", "lambda_", "weights", "synonyms", "interactive", "soft", "verifier", "extra_judge", "device"}


def _resolve(options: dict[str, Any]) -> tuple[Pipeline, Options, dict[str, Any]]:
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"cesg_score: unknown options {unknown}; known: {sorted(_OPTIONS)}")
    pipe = options.get("pipeline") or _pipeline(options.get("coref", "rule"), options.get("parser", "rule"), options.get("device"))
    lam = float(options.get("lambda_", DEFAULT_LAMBDA))
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda_: expected a similarity threshold in [0, 1], got {lam!r}")
    weights = tuple(float(w) for w in options.get("weights", DEFAULT_WEIGHTS))
    if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights: expected three non-negative (w_o, w_a, w_r) with a positive sum, got {options.get('weights')!r}")
    enc = options.get("encoder", "default")
    interactive, soft = bool(options.get("interactive", True)), bool(options.get("soft", True))
    if enc is None:
        encoder = None
    elif isinstance(enc, str):
        from lmms_scene.nlp.encoders import sentence_encoder

        encoder = sentence_encoder(None if enc == "default" else enc, options.get("device")) if (interactive or soft) else None
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


def describe(pipe: Pipeline, opts: Options) -> dict[str, Any]:
    """Provenance of a CESG configuration: every component and threshold."""
    return _provenance.scorer(
        "cesg",
        **pipe.provenance(),
        **(opts.encoder.provenance if opts.encoder is not None else {"similarity_model": None}),
        wordnet_synonyms=opts.use_synonyms,
        synonym_verifier=getattr(opts.verifier, "provenance", getattr(opts.verifier, "name", "callable")) if opts.verifier else None,
        interactive_matching=opts.interactive and opts.encoder is not None,
        interactive_lambda=opts.lambda_,
        extra_matching=getattr(opts.extra_judge, "provenance", "on") if opts.extra_judge else "off",
        soft_matching=opts.soft and opts.encoder is not None,
        weights={"w_o": opts.weights[0], "w_a": opts.weights[1], "w_r": opts.weights[2]},
    )


def cesg_graph(text: str, **options: Any) -> Construction:
    """Every stage's output for ``text`` (resolved text, sentences, affirmative sentences,
    sentence-level and scene-level CESG, failures), for inspection."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    pipe = options.get("pipeline") or _pipeline(options.get("coref", "rule"), options.get("parser", "rule"), options.get("device"))
    return pipe.construct(text)


def reference_graph(pipe: Pipeline, references: Sequence[str]) -> CESG:
    """The scene-level CESG of several references (stage VI over all of them)."""
    graphs = [pipe.build(r) for r in references]
    return graphs[0] if len(graphs) == 1 else combine(graphs, [f for g in graphs for f in g.failures])


def _score(pipe: Pipeline, opts: Options, prediction: str, references: list[str]) -> dict[str, Any]:
    gt = reference_graph(pipe, references)
    failures = list(gt.failures)
    if not gt.has_absent_information():
        return {**{k: None for k in KEYS}, "status": NO_ABSENT_REFERENCE, "parse_failures": [f.to_json() for f in failures]}
    if not prediction.strip():
        return {**{k: 0.0 for k in KEYS}, "status": EMPTY_PREDICTION, "parse_failures": [f.to_json() for f in failures]}
    pred = pipe.build(prediction)
    failures += pred.failures
    if not pred.has_absent_information():
        # the paper's AC row: no absent information claimed scores 0 on every dimension
        return {**{k: 0.0 for k in KEYS}, "status": NO_ABSENT_PREDICTION, "parse_failures": [f.to_json() for f in failures]}
    opts.judge_failures = []
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


def score_corpus(pairs: Sequence[tuple[str, str, Sequence[str]]], **options: Any) -> dict[str, Any]:
    """Score ``(id, prediction, references)`` triples: per-row scores, corpus means over
    scored rows (rows scoring 0 for an empty prediction included), counts of excluded
    references, empty predictions and parse failures, and the provenance."""
    from lmms_scene.metrics.rows import mean

    pipe, opts, prov = _resolve(dict(options))
    # build every graph first, in batches (coref and parser batched across texts)
    try:
        pipe.build_many([t for _, p, refs in pairs for t in (p, *texts(refs, "references")) if isinstance(t, str)])
    except TypeError:
        pass  # a malformed row: the loop below names it
    rows = []
    from lmms_scene.progress import progress

    for i, (row_id, prediction, refs) in enumerate(progress(pairs, "CESG", unit="pair")):
        if not isinstance(prediction, str):
            raise TypeError(f"row {i} (id {row_id!r}): prediction: expected a string, got {type(prediction).__name__}: {prediction!r}")
        rows.append({"id": row_id, **_score(pipe, opts, prediction, texts(refs, f"row {i} (id {row_id!r}): references", allow_empty=False))})
    means = {k: mean(r[k] for r in rows) for k in KEYS}
    return {
        "rows": rows,
        "means": means,
        "n": len(rows),
        "n_scored": sum(r["status"] != NO_ABSENT_REFERENCE for r in rows),
        "n_reference_without_absent_information": sum(r["status"] == NO_ABSENT_REFERENCE for r in rows),
        "n_empty_prediction": sum(r["status"] == EMPTY_PREDICTION for r in rows),
        "n_prediction_without_absent_information": sum(r["status"] == NO_ABSENT_PREDICTION for r in rows),
        "n_parse_failures": sum(len(r["parse_failures"]) for r in rows),
        "provenance": prov,
    }
