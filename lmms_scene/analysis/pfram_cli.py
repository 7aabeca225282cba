"""``lmms-scene pfram extract|score|correlate``: the command line over the Pfram library.

- ``extract``: image representations of chosen layers into a features directory
  (:mod:`lmms_scene.analysis.extract`).
- ``score``: Pfram per layer for one or more (phi, k, tie policy) settings, plus
  Pfram_input / Pfram_mean / Pfram_max, printed (and optionally written) as JSON.
- ``correlate``: Pearson r across models between one Pfram summary and POPE
  accuracy (mean of the random, popular and adversarial splits) read from
  lmms-eval results files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: lmms-eval 0.7.3 task names of the three POPE splits.
DEFAULT_POPE_TASKS = ("pope_random", "pope_pop", "pope_adv")
POPE_METRIC = "pope_accuracy,none"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lmms-scene pfram", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("extract", help="extract image representations of chosen layers")
    e.add_argument("--model", required=True, help="checkpoint directory or hub name")
    e.add_argument("--images", required=True, type=Path, help="directory of image files")
    e.add_argument("--labels", type=Path, help="labels file: extract only its images, in its order")
    e.add_argument("--min-objects", type=int, default=None, help="labels filter (AMBER default 5, else 1)")
    e.add_argument("--image-list", type=Path, help="text file of image names (one per line) instead of --labels")
    e.add_argument("--out", required=True, type=Path, help="features directory (resumable)")
    e.add_argument("--layers", default="llm.every4", help="e.g. vision.-1,llm.every4 or llm.0,llm.8")
    e.add_argument("--instruction", default=None, help="user text put before the image (default: image only)")
    e.add_argument("--batch-size", type=int, default=8)
    e.add_argument("--shard-size", type=int, default=64)
    e.add_argument("--device", default="cpu")
    e.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    e.add_argument("--device-map", default=None, help="'auto' spreads the model over several GPUs (accelerate)")
    e.add_argument("--processor-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="processor option, e.g. max_pixels=50176 (repeatable)")  # fmt: skip
    e.add_argument("--skip-missing", action="store_true", help="skip labelled images whose file is absent")

    s = sub.add_parser("score", help="Pfram per layer from extracted features")
    s.add_argument("--features", required=True, type=Path)
    s.add_argument("--labels", type=Path, help="G_obj: AMBER annotations, COCO instances, or a label map")
    s.add_argument("--descriptions", type=Path, help="G_des instead: JSON object image -> one-sentence description")
    s.add_argument("--sentence-model", default=None, help="G_des encoder (default: offline all-MiniLM-L6-v2)")
    s.add_argument("--min-objects", type=int, default=None)
    s.add_argument("--phi", default="ndcg", help="ndcg, knn or ndcg,knn")
    s.add_argument("--k", default="100", help="one or more, e.g. 25,100")
    s.add_argument("--ties", default="index", help="index, expected or index,expected")
    s.add_argument("--layers", default=None, help="subset of the stored layers (comma-separated names)")
    s.add_argument("--input-layer", default="llm.0", help="layer reported as Pfram_input")
    s.add_argument("--on-undefined", default="raise", choices=["raise", "skip", "zero"],
                   help="anchors sharing no label with any image (NDCG and knn): error, leave out of the mean,"
                        " or score 0 (the reference code's choice)")  # fmt: skip
    s.add_argument("--drop-unlabelled", action="store_true", help="score only the images the labels file keeps")
    s.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples for 95%% intervals (0: none)")
    s.add_argument("--block-bytes", type=int, default=None)
    s.add_argument("--device", default=None)
    s.add_argument("--output", type=Path, default=None, help="also write the JSON here")

    c = sub.add_parser("correlate", help="Pearson r between Pfram and POPE accuracy across models")
    c.add_argument("--scores", nargs="+", required=True, type=Path, help="JSON files written by 'pfram score'")
    c.add_argument("--pope", nargs="+", required=True,
                   help="lmms-eval results JSON per model (same order as --scores), or an accuracy number")  # fmt: skip
    c.add_argument("--summary", default="input", choices=["input", "mean", "max"])
    c.add_argument("--phi", default="ndcg")
    c.add_argument("--k", type=int, default=100)
    c.add_argument("--ties", default="index")
    c.add_argument("--pope-tasks", default=",".join(DEFAULT_POPE_TASKS),
                   help="the random, popular and adversarial task names in the results files")  # fmt: skip
    c.add_argument("--output", type=Path, default=None)
    return p


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _processor_kwargs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--processor-arg: expected KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _cmd_extract(a: argparse.Namespace) -> dict[str, Any]:
    from lmms_scene.analysis.extract import FeatureStore, extract_features
    from lmms_scene.analysis.labels import read_labels

    if a.labels is not None and a.image_list is not None:
        raise ValueError("give --labels or --image-list, not both")
    if a.labels is not None:
        names = list(read_labels(a.labels, min_objects=a.min_objects))
    elif a.image_list is not None:
        names = [ln.strip() for ln in a.image_list.read_text().splitlines() if ln.strip()]
    else:
        names = sorted(p.name for p in a.images.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".webp"))
    missing = [n for n in names if not (a.images / n).is_file()]
    if missing and not a.skip_missing:
        raise FileNotFoundError(
            f"{len(missing)} of {len(names)} images are not in {a.images} (e.g. {missing[:3]}); pass --skip-missing to skip them"
        )
    names = [n for n in names if n not in set(missing)]

    # Under `accelerate launch` each process extracts its share of the shards.
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = a.device
    if world > 1 and device.startswith("cuda") and ":" not in device:
        device = f"cuda:{os.environ.get('LOCAL_RANK', rank)}"

    def progress(done: int, total: int) -> None:
        print(f"pfram extract [process {rank}/{world}]: {done}/{total} images", file=sys.stderr)

    out = extract_features(
        a.model,
        [a.images / n for n in names],
        a.out,
        image_ids=names,
        layers=a.layers,
        instruction=a.instruction,
        batch_size=a.batch_size,
        shard_size=a.shard_size,
        device=device,
        dtype=a.dtype,
        device_map=a.device_map,
        processor_kwargs=_processor_kwargs(a.processor_arg),
        progress=progress,
        process_index=rank,
        num_processes=world,
    )
    store = FeatureStore(out)
    return {"features": str(out), "n_images": len(names), "skipped_missing": len(missing), "layers": store.layers}


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


def main(argv: list[str]) -> int:
    """Run ``lmms-scene pfram <argv>``; returns the exit status (2 for bad input)."""
    a = _parser().parse_args(argv)
    try:
        if a.command == "extract":
            out = _cmd_extract(a)
        elif a.command == "score":
            out = score_features(
                a.features,
                a.labels,
                phis=_csv(a.phi),
                ks=[int(x) for x in _csv(a.k)],
                ties=_csv(a.ties),
                layers=_csv(a.layers) if a.layers else None,
                input_layer=a.input_layer,
                min_objects=a.min_objects,
                drop_unlabelled=a.drop_unlabelled,
                on_undefined=a.on_undefined,
                bootstrap=a.bootstrap,
                block_bytes=a.block_bytes,
                device=a.device,
                descriptions_path=a.descriptions,
                sentence_model=a.sentence_model,
            )
        else:
            out = correlate(
                a.scores,
                a.pope,
                summary=a.summary,
                phi=a.phi,
                k=a.k,
                ties=a.ties,
                pope_tasks=_csv(a.pope_tasks),
            )
    except (ValueError, KeyError, FileNotFoundError, RuntimeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"lmms-scene pfram {a.command}: error: {msg}", file=sys.stderr)
        return 2
    text = json.dumps(out, indent=2)
    print(text)
    if getattr(a, "output", None) is not None:
        a.output.parent.mkdir(parents=True, exist_ok=True)
        a.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
