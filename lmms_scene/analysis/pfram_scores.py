"""Pfram studies over extracted features: scoring every stored layer, and correlating
a Pfram summary with POPE accuracy across models (Pfram paper, Table 1).

The command line over these is ``lmms-scene pfram`` (:mod:`lmms_scene.cli.pfram`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lmms_scene
from lmms_scene.analysis.labels import labels_for, read_json, read_labels
from lmms_scene.progress import progress
from lmms_scene.provenance import scorer

#: lmms-eval 0.7.3 task names of the three POPE splits.
DEFAULT_POPE_TASKS = ("pope_random", "pope_pop", "pope_adv")
POPE_METRIC = "pope_accuracy,none"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


def select_images(
    images_dir: Path,
    labels_path: Path | None = None,
    image_list: Path | None = None,
    *,
    min_objects: int | None = None,
    skip_missing: bool = False,
) -> tuple[list[str], list[str]]:
    """The image names to extract, in order, and those skipped as missing: the labelled
    images of ``labels_path``, or the names listed in ``image_list``, or every image file
    of ``images_dir``. A missing file is an error unless ``skip_missing``."""
    if labels_path is not None and image_list is not None:
        raise ValueError("give --labels or --image-list, not both")
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise FileNotFoundError(f"--images: {images_dir} is not a folder")
    if labels_path is not None:
        names = list(read_labels(labels_path, min_objects=min_objects))
        source = f"--labels {labels_path}"
    elif image_list is not None:
        image_list = Path(image_list)
        if not image_list.is_file():
            raise FileNotFoundError(f"--image-list: {image_list} not found")
        try:
            lines = image_list.read_text(encoding="utf-8-sig").splitlines()
        except UnicodeDecodeError as exc:
            raise ValueError(f"--image-list {image_list}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        names = [ln.strip() for ln in lines if ln.strip()]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"--image-list {image_list}: image name(s) listed more than once: {dups[:5]}")
        source = f"--image-list {image_list}"
    else:
        names = sorted(p.name for p in images_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        source = f"--images {images_dir} ({', '.join(IMAGE_SUFFIXES)} files)"
    if not names:
        raise ValueError(f"no images selected: {source} lists none")
    missing = [n for n in names if not (images_dir / n).is_file()]
    if missing and not skip_missing:
        raise FileNotFoundError(
            f"{len(missing)} of {len(names)} images are not in {images_dir} (e.g. {missing[:3]}); pass --skip-missing to skip them"
        )
    gone = set(missing)
    return [n for n in names if n not in gone], missing


def score_features(
    features_dir: Path,
    labels_path: Path | None,
    *,
    phis: list[str],
    ks: list[int],
    ties: list[str],
    layers: list[str] | None = None,
    input_layer: str = "llm.0",
    min_objects: int | None = None,
    drop_unlabelled: bool = False,
    on_undefined: str = "raise",
    bootstrap: int = 0,
    block_bytes: int | None = None,
    device: str | None = None,
    descriptions_path: Path | None = None,
    sentence_model: str | None = None,
) -> dict[str, Any]:
    """Pfram of every stored layer for each (phi, k, ties); the body of ``pfram score``.

    The gold system is G_obj from ``labels_path`` (AMBER, COCO or a label map), or
    G_des from ``descriptions_path`` (a JSON object image -> one-sentence
    description, embedded with ``sentence_model``; paper: all-mpnet-base-v2).
    """
    import numpy as np  # deferred: numpy is heavy to import

    from lmms_scene.analysis import pfram as P  # deferred: imports torch at module top
    from lmms_scene.analysis.shards import FeatureStore  # deferred: imports torch at module top

    phis, ks, ties = _check_settings(phis, ks, ties, on_undefined, bootstrap)
    store = FeatureStore(features_dir)
    if (labels_path is None) == (descriptions_path is None):
        raise ValueError("give exactly one gold system: --labels (G_obj) or --descriptions (G_des)")
    if descriptions_path is not None:
        raw = read_json(descriptions_path, "--descriptions file")
        if not isinstance(raw, dict):
            raise ValueError(
                f"{descriptions_path}: expected a JSON object of image name -> one-sentence description,"
                f" got a JSON {type(raw).__name__}"
            )
        for image_id, text in raw.items():
            if not isinstance(text, str) or not text.strip():
                raise ValueError(
                    f"{descriptions_path}: image {image_id!r}: expected a non-empty description, got {text!r}"
                )
        labels: dict[str, Any] = raw
        source = descriptions_path
    else:
        labels = read_labels(labels_path, min_objects=min_objects)
        source = labels_path
    chosen = store.layers if layers is None else layers
    unknown = [x for x in chosen if x not in store.layers]
    if unknown:
        raise ValueError(f"--layers: {unknown} not stored in {features_dir} (has {store.layers})")
    ids_all = list(store.meta["image_ids"])
    keep = [i for i, x in enumerate(ids_all) if x in labels]
    dropped = len(ids_all) - len(keep)
    if dropped and not drop_unlabelled:
        missing = [x for x in ids_all if x not in labels]
        raise ValueError(
            f"{dropped} of {len(ids_all)} images have no labels in {source} (e.g. {missing[:3]});"
            " pass --drop-unlabelled to score the others"
        )
    ids = [ids_all[i] for i in keep]
    n = len(ids)
    if n < 2:
        raise ValueError(f"{features_dir}: {n} image(s) left to score with {source}; Pfram needs at least 2")
    bad_k = [k for k in ks if not 1 <= k <= n - 1]
    if bad_k:
        raise ValueError(
            f"k: expected an integer in [1, n - 1] = [1, {n - 1}] for the {n} images scored"
            f" (the anchor is excluded), got {bad_k[0]}"
        )
    if descriptions_path is not None:
        gold: Any = P.description_relevance(P.embed_descriptions([labels[i] for i in ids], sentence_model))
        gold_kind, gold_name = "relevance", f"G_des (description cosine, {sentence_model or 'all-MiniLM-L6-v2'})"
    else:
        gold = labels_for(ids, labels)
        gold_kind, gold_name = "labels", "G_obj (shared object labels)"
    sim_kwargs: dict[str, Any] = {"device": device}
    if block_bytes is not None:
        sim_kwargs["block_bytes"] = block_bytes

    per_layer: dict[tuple[str, int, str], dict[str, float]] = {}
    intervals: dict[tuple[str, int, str], dict[str, list[float]]] = {}
    skipped: dict[tuple[str, int, str], int] = {}

    for layer in progress(chosen, "pfram score", unit="layer"):
        _, feats = store.load(layer)
        feats = [feats[i] for i in keep]
        try:
            sim = P.image_similarity(feats, ids=ids, **sim_kwargs)
        except ValueError as exc:
            raise ValueError(f"{features_dir}, layer {layer}: {exc}") from exc
        P.warn_duplicates(sim, ids=ids)
        for phi in phis:
            for k in ks:
                for t in ties:
                    try:
                        per = P.pfram_per_anchor(
                            sim,
                            gold,
                            phi=phi,
                            k=k,
                            ties=t,
                            gold=gold_kind,
                            on_undefined=on_undefined,
                            first="similarity",
                            ids=ids,
                        )
                    except ValueError as exc:
                        raise ValueError(f"{features_dir}, layer {layer}, phi={phi}, k={k}: {exc}") from exc
                    undefined = int(np.isnan(per).sum())
                    if undefined == len(per):
                        raise ValueError(f"{features_dir}, layer {layer}: no anchor has a defined {phi} score")
                    per_layer.setdefault((phi, k, t), {})[layer] = float(np.nanmean(per))
                    skipped[(phi, k, t)] = undefined
                    if bootstrap:
                        lo, hi = P.bootstrap_interval(per, n_resamples=bootstrap)
                        intervals.setdefault((phi, k, t), {})[layer] = [lo, hi]
    rows = []
    for (phi, k, t), scores in per_layer.items():
        row: dict[str, Any] = {"phi": phi, "k": k, "ties": t, "skipped_anchors": skipped[(phi, k, t)], "layers": scores}
        # Pfram_mean / Pfram_max are over the LLM layers (paper Sec. 4.1) when any were scored
        summary_layers = [x for x in scores if x.startswith("llm.")] or list(scores)
        row.update(P.layer_summary({x: scores[x] for x in summary_layers}, input_layer=input_layer))
        row["summary_layers"] = summary_layers
        if bootstrap:
            row["ci95"] = intervals[(phi, k, t)]
        rows.append(row)

    return {
        "computed_by": f"lmms-scene {getattr(lmms_scene, '__version__', 'unknown')} pfram score",
        "provenance": scorer(
            "pfram",
            checkpoint=str(store.meta["model"]),
            device=device or "auto",
            thresholds={"phi": list(phis), "k": list(ks), "ties": list(ties), "on_undefined": on_undefined},
            libraries=("torch", "numpy"),
            gold=gold_name,
            features=str(features_dir),
        ),
        "model": store.meta["model"],
        "architecture": store.meta["architecture"],
        "instruction": store.meta["instruction"],
        "features": str(features_dir),
        "labels": str(source),
        "gold": gold_name,
        "n_images": len(ids),
        "dropped_unlabelled": dropped,
        "input_layer": input_layer,
        "on_undefined": on_undefined,
        "tie_policy": {
            "index": "stable sort, lower image index first",
            "expected": "expectation under random tie-breaks",
        },
        "rows": rows,
    }


def _check_settings(
    phis: Sequence[str], ks: Sequence[int], ties: Sequence[str], on_undefined: str, bootstrap: int
) -> tuple[list[str], list[int], list[str]]:
    """Validate the (phi, k, ties) grid before any feature is read; duplicates dropped."""
    from lmms_scene.analysis.pfram import PHIS, TIES  # deferred: imports torch at module top

    def one_or_more(name: str, values: Sequence[Any], allowed: Sequence[str] | None) -> list[Any]:
        values = list(dict.fromkeys(values))
        if not values:
            raise ValueError(f"{name}: no value given")
        for v in values:
            if allowed is not None and v not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {v!r}")
        return values

    phis = one_or_more("phi", phis, PHIS)
    ties = one_or_more("ties", ties, TIES)
    ks = one_or_more("k", ks, None)
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k: expected positive integers, got {k!r}")
    if on_undefined not in ("raise", "skip", "zero"):
        raise ValueError(f"on_undefined: expected raise, skip or zero, got {on_undefined!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
        raise ValueError(f"bootstrap: expected a non-negative integer, got {bootstrap!r}")
    return phis, ks, ties


def _read_results(results_path: Path) -> dict[str, Any]:
    data = read_json(results_path, "--pope results file")
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        got = "no 'results' object" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise ValueError(f"{results_path}: not an lmms-eval results file ({got})")  # noqa: TRY004
    return data


def pope_accuracy(results_path: Path, tasks: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Mean POPE accuracy over the given split tasks of one lmms-eval results JSON."""
    results = _read_results(results_path)["results"]
    per: dict[str, float] = {}
    for task in tasks:
        if task not in results:
            raise KeyError(f"{results_path}: task {task!r} missing (has {sorted(results)}); set --pope-tasks")
        entry = results[task]
        value = entry.get(POPE_METRIC) if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KeyError(f"{results_path}: {task}: {POPE_METRIC!r} is {value!r}, not a number")
        per[task] = float(value)
    return sum(per.values()) / len(per), per


def _model_name(results_path: Path) -> str:
    cfg = _read_results(results_path).get("config", {})
    if not isinstance(cfg, dict):
        return str(results_path)
    args = str(cfg.get("model_args", ""))
    for part in args.split(","):
        if part.startswith("pretrained="):
            return part.split("=", 1)[1]
    return str(cfg.get("model", results_path))


def _basename(model: str) -> str:
    """``org/llava-1.5-7b-hf``, ``/ckpt/llava-1.5-7b-hf/`` -> ``llava-1.5-7b-hf``."""
    return model.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def _check_accuracy(acc: float, source: str, per: dict[str, float]) -> None:
    """POPE accuracy must be a fraction in [0, 1], as lmms-eval reports it."""
    bad = {t: v for t, v in per.items() if not 0.0 <= v <= 1.0}
    if bad or not (math.isfinite(acc) and 0.0 <= acc <= 1.0):
        detail = f" (splits {bad})" if bad else ""
        raise ValueError(
            f"--pope {source}: POPE accuracy {acc:g}{detail} is outside [0, 1]; give accuracies as fractions"
            " like lmms-eval's (e.g. 0.85, not 85 percent), and do not mix percentages with results files"
        )


def _pfram_summary(path: Path, summary: str, phi: str, k: int, ties: str) -> tuple[dict[str, Any], float]:
    """(the score file, its Pfram_<summary> for (phi, k, ties)), every problem naming the file."""
    sc = read_json(path, "--scores file")
    if not isinstance(sc, dict) or not isinstance(sc.get("rows"), list):
        got = "no 'rows' list" if isinstance(sc, dict) else f"a JSON {type(sc).__name__}"
        raise ValueError(f"{path}: not a `pfram score` output ({got})")  # noqa: TRY004
    if not isinstance(sc.get("model"), str):
        raise ValueError(f"{path}: 'model' is {sc.get('model')!r}; a `pfram score` output names its model")  # noqa: TRY004
    rows = [r for r in sc["rows"] if isinstance(r, dict)]
    match = [r for r in rows if (r.get("phi"), r.get("k"), r.get("ties")) == (phi, k, ties)]
    if not match:
        have = sorted({f"phi={r.get('phi')}, k={r.get('k')}, ties={r.get('ties')}" for r in rows})
        raise KeyError(f"{path}: no row for phi={phi}, k={k}, ties={ties} (has {have[:6]})")
    value = match[0].get(summary)
    if value is None:
        raise ValueError(f"{path}: Pfram_{summary} is undefined (input layer {sc.get('input_layer')} not scored)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{path}: Pfram_{summary} for phi={phi}, k={k}, ties={ties} is {value!r}, not a number in [0, 1]"
        )
    return sc, float(value)


def correlate(
    score_files: list[Path],
    pope: list[str],
    *,
    summary: str = "input",
    phi: str = "ndcg",
    k: int = 100,
    ties: str = "index",
    pope_tasks: Sequence[str] = DEFAULT_POPE_TASKS,
) -> dict[str, Any]:
    """Pearson r between a Pfram summary and POPE accuracy across models (Pfram paper, Table 1)."""
    from scipy.stats import pearsonr  # deferred: SciPy is heavy to import

    if len(score_files) != len(pope):
        raise ValueError(f"--scores has {len(score_files)} files but --pope has {len(pope)}; pair them in order")
    if len(score_files) < 3:
        raise ValueError("correlate: need at least 3 models for a meaningful Pearson r")
    if len(pope_tasks) != 3:
        raise ValueError(f"--pope-tasks: expected the random, popular and adversarial task names, got {pope_tasks}")
    if summary not in ("input", "mean", "max"):
        raise ValueError(f"summary: expected input, mean or max, got {summary!r}")
    rows = []
    for sf, pp in zip(score_files, pope):
        sc, value = _pfram_summary(Path(sf), summary, phi, k, ties)
        try:
            acc, per, name = float(pp), {}, sc["model"]
        except ValueError:
            acc, per = pope_accuracy(Path(pp), pope_tasks)
            name = _model_name(Path(pp))
            if _basename(name) != _basename(str(sc["model"])):
                print(
                    f"lmms-scene pfram correlate: warning: {sf} scores model {sc['model']!r} but {pp} was run with"
                    f" pretrained={name!r}; check that --scores and --pope are paired in the same order",
                    file=sys.stderr,
                )
        _check_accuracy(acc, pp, per)
        rows.append(
            {"model": sc["model"], "pope_model": name, "pfram": value, "pope_accuracy": acc, "pope_splits": per}
        )
    x = [r["pfram"] for r in rows]
    y = [r["pope_accuracy"] for r in rows]
    if len(set(x)) == 1 or len(set(y)) == 1:
        raise ValueError("correlate: Pfram or POPE accuracy is constant across models; Pearson r is undefined")
    res = pearsonr(x, y)

    return {
        "computed_by": "scipy.stats.pearsonr",
        "provenance": scorer(
            "pfram_pope_correlation",
            thresholds={"summary": summary, "phi": phi, "k": k, "ties": ties},
            libraries=("scipy",),
            statistic="Pearson r",
        ),
        "summary": f"Pfram_{summary}",
        "phi": phi,
        "k": k,
        "ties": ties,
        "pope_tasks": list(pope_tasks),
        "n_models": len(rows),
        "pearson_r": float(res.statistic),
        "p_value": float(res.pvalue),
        "rows": rows,
    }
