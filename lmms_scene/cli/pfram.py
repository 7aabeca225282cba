"""``pfram extract|score|correlate``: the command line over the Pfram library.

- ``extract``: image representations of chosen layers into a features directory
  (:mod:`lmms_scene.analysis.extract`).
- ``score``: Pfram per layer for one or more (phi, k, tie policy) settings, plus
  Pfram_input / Pfram_mean / Pfram_max, printed (and optionally written) as JSON
  (:func:`lmms_scene.analysis.pfram_scores.score_features`).
- ``correlate``: Pearson r across models between one Pfram summary and POPE accuracy
  (mean of the random, popular and adversarial splits) read from lmms-eval results files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmms_scene import settings
from lmms_scene.analysis.pfram_scores import DEFAULT_POPE_TASKS, correlate, score_features, select_images
from lmms_scene.cli import main as cli_main
from lmms_scene.files import write_atomic
from lmms_scene.settings import process_group


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _int_list(value: str) -> list[int]:
    try:
        return [int(x) for x in _csv(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {value!r}") from None


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


def register(sub) -> None:
    top = sub.add_parser(
        "pfram",
        help="Pfram feature extraction, scoring and correlation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = top.add_subparsers(dest="pfram_command", required=True, metavar="COMMAND")

    e = cmds.add_parser("extract", help="extract image representations of chosen layers")
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
    e.add_argument(
        "--processor-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="processor option, e.g. max_pixels=50176 (repeatable)",
    )
    e.add_argument("--skip-missing", action="store_true", help="skip labelled images whose file is absent")
    e.set_defaults(fn=_extract, command_name="pfram extract")

    s = cmds.add_parser("score", help="Pfram per layer from extracted features")
    s.add_argument("--features", required=True, type=Path)
    s.add_argument("--labels", type=Path, help="G_obj: AMBER annotations, COCO instances, or a label map")
    s.add_argument("--descriptions", type=Path, help="G_des instead: JSON object image -> one-sentence description")
    s.add_argument("--sentence-model", default=None, help="G_des encoder (default: offline all-MiniLM-L6-v2)")
    s.add_argument("--min-objects", type=int, default=None)
    s.add_argument("--phi", default="ndcg", type=_csv, help="ndcg, knn or ndcg,knn")
    s.add_argument("--k", default=[100], type=_int_list, help="one or more, e.g. 25,100")
    s.add_argument("--ties", default="index", type=_csv, help="index, expected or index,expected")
    s.add_argument("--layers", default=None, type=_csv, help="subset of the stored layers (comma-separated names)")
    s.add_argument("--input-layer", default="llm.0", help="layer reported as Pfram_input")
    s.add_argument(
        "--on-undefined",
        default="raise",
        choices=["raise", "skip", "zero"],
        help="anchors sharing no label with any image (NDCG and knn): error, leave out of the mean,"
        " or score 0 (the reference code's choice)",
    )
    s.add_argument("--drop-unlabelled", action="store_true", help="score only the images the labels file keeps")
    s.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples for 95%% intervals (0: none)")
    s.add_argument("--block-bytes", type=int, default=None)
    s.add_argument("--device", default=None)
    s.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    s.set_defaults(fn=_score, command_name="pfram score")

    c = cmds.add_parser("correlate", help="Pearson r between Pfram and POPE accuracy across models")
    c.add_argument("--scores", nargs="+", required=True, type=Path, help="JSON files written by 'pfram score'")
    c.add_argument(
        "--pope",
        nargs="+",
        required=True,
        help="lmms-eval results JSON per model (same order as --scores), or an accuracy number",
    )
    c.add_argument("--summary", default="input", choices=["input", "mean", "max"])
    c.add_argument("--phi", default="ndcg")
    c.add_argument("--k", type=int, default=100)
    c.add_argument("--ties", default="index")
    c.add_argument(
        "--pope-tasks",
        default=",".join(DEFAULT_POPE_TASKS),
        type=_csv,
        help="the random, popular and adversarial task names in the results files",
    )
    c.add_argument("--output", type=Path, default=None)
    c.set_defaults(fn=_correlate, command_name="pfram correlate")


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """Library warnings (a shard re-extracted, duplicate images) as one line each on stderr."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"lmms-scene {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():  # restores the filters and showwarning on exit
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def _emit(out: dict[str, Any], output: Path | None) -> int:
    text = json.dumps(out, indent=2)
    print(text)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, text + "\n")
    return 0


def _extract(a) -> int:
    from lmms_scene.analysis.extract import FeatureStore, extract_features  # deferred: imports torch at module top

    names, missing = select_images(
        a.images, a.labels, a.image_list, min_objects=a.min_objects, skip_missing=a.skip_missing
    )
    # Under `accelerate launch` each process extracts its share of the shards.

    rank, world, local_rank = process_group()
    device = a.device
    if world > 1 and device.startswith("cuda") and ":" not in device:
        device = f"cuda:{local_rank}"

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar

        if not settings.current().progress:
            return
        if bar is None:
            from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

            bar = tqdm(total=total, desc=f"pfram extract [process {rank}/{world}]", unit="image")
        bar.update(done - bar.n)

    with _warnings_as_lines("pfram extract"):
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
    if bar is not None:
        bar.close()
    store = FeatureStore(out)
    return _emit(
        {"features": str(out), "n_images": len(names), "skipped_missing": len(missing), "layers": store.layers}, None
    )


def _score(a) -> int:
    with _warnings_as_lines("pfram score"):
        out = score_features(
            a.features,
            a.labels,
            phis=a.phi,
            ks=a.k,
            ties=a.ties,
            layers=a.layers or None,
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
    return _emit(out, a.output)


def _correlate(a) -> int:
    out = correlate(a.scores, a.pope, summary=a.summary, phi=a.phi, k=a.k, ties=a.ties, pope_tasks=a.pope_tasks)
    return _emit(out, a.output)


def main(argv: list[str]) -> int:
    """``lmms-scene pfram <argv>`` (for scripts and tests)."""
    return cli_main(["pfram", *argv])
