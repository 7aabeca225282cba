"""Pfram studies over extracted features: scoring every stored layer, and correlating
a Pfram summary with POPE accuracy across models (Pfram paper, Table 1).

The command line over these is ``lmms-scene pfram`` (:mod:`lmms_scene.cli.pfram`).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    from lmms_scene.analysis.labels import read_labels

    if labels_path is not None and image_list is not None:
        raise ValueError("give --labels or --image-list, not both")
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise FileNotFoundError(f"--images: {images_dir} is not a folder")
    if labels_path is not None:
        names = list(read_labels(labels_path, min_objects=min_objects))
    elif image_list is not None:
        names = [ln.strip() for ln in Path(image_list).read_text().splitlines() if ln.strip()]
    else:
        names = sorted(p.name for p in images_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
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
    import numpy as np

    import lmms_scene
    from lmms_scene.analysis import pfram as P
    from lmms_scene.analysis.extract import FeatureStore
    from lmms_scene.analysis.labels import labels_for, read_labels

    store = FeatureStore(features_dir)
    if (labels_path is None) == (descriptions_path is None):
        raise ValueError("give exactly one gold system: --labels (G_obj) or --descriptions (G_des)")
    if descriptions_path is not None:
        raw = json.loads(Path(descriptions_path).read_text())
        if not isinstance(raw, dict) or not all(isinstance(v, str) and v.strip() for v in raw.values()):
            raise ValueError(f"{descriptions_path}: expected a JSON object of image name -> non-empty description")
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
    for layer in chosen:
        _, feats = store.load(layer)
        feats = [feats[i] for i in keep]
        sim = P.image_similarity(feats, **sim_kwargs)
        P.warn_duplicates(sim)
        for phi in phis:
            for k in ks:
                for t in ties:
                    per = P.pfram_per_anchor(
                        sim, gold, phi=phi, k=k, ties=t, gold=gold_kind, on_undefined=on_undefined, first="similarity"
                    )
                    undefined = int(np.isnan(per).sum())
                    if undefined == len(per):
                        raise ValueError(f"layer {layer}: no anchor has a defined {phi} score")
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


def pope_accuracy(results_path: Path, tasks: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Mean POPE accuracy over the given split tasks of one lmms-eval results JSON."""
    data = json.loads(Path(results_path).read_text())
    results = data.get("results")
    if not isinstance(results, dict):
        raise ValueError(f"{results_path}: not an lmms-eval results file (no 'results' object)")  # noqa: TRY004
    per: dict[str, float] = {}
    for task in tasks:
        if task not in results:
            raise KeyError(f"{results_path}: task {task!r} missing (has {sorted(results)}); set --pope-tasks")
        value = results[task].get(POPE_METRIC)
        if not isinstance(value, (int, float)):
            raise KeyError(f"{results_path}: {task} has no numeric {POPE_METRIC!r}")
        per[task] = float(value)
    return sum(per.values()) / len(per), per


def _model_name(results_path: Path) -> str:
    cfg = json.loads(Path(results_path).read_text()).get("config", {})
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
    from scipy.stats import pearsonr

    if len(score_files) != len(pope):
        raise ValueError(f"--scores has {len(score_files)} files but --pope has {len(pope)}; pair them in order")
    if len(score_files) < 3:
        raise ValueError("correlate: need at least 3 models for a meaningful Pearson r")
    if len(pope_tasks) != 3:
        raise ValueError(f"--pope-tasks: expected the random, popular and adversarial task names, got {pope_tasks}")
    rows = []
    for sf, pp in zip(score_files, pope):
        sc = json.loads(Path(sf).read_text())
        match = [r for r in sc.get("rows", []) if r["phi"] == phi and r["k"] == k and r["ties"] == ties]
        if not match:
            raise KeyError(f"{sf}: no row for phi={phi}, k={k}, ties={ties}")
        value = match[0][summary]
        if value is None:
            raise ValueError(f"{sf}: Pfram_{summary} is undefined (input layer {sc.get('input_layer')} not scored)")
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
