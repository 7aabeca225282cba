"""``build cooco``: the COOCO dataset from its release, ready to evaluate."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from lmms_scene.data import cooco
from lmms_scene.data.cooco.schema import HUB_REPO, CoocoBuildWarning


def _column_map(item: str) -> tuple[str, str | None]:
    source, sep, field = item.partition("=")
    if not sep or not source:
        raise argparse.ArgumentTypeError(f"expected SOURCE=FIELD or SOURCE=-, got {item!r}")
    return source, (None if field in ("", "-") else field)


def register_build(builds) -> None:
    p = builds.add_parser(
        "cooco",
        help="convert the COOCO release (hub or folder) into a dataset plus the tasks that evaluate it",
        description="Convert the COOCO release into an HF dataset. With --out, also write the lmms-eval tasks "
        "that evaluate it and print the command to run them.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from-hub",
        metavar="REPO",
        help=f"hub dataset, e.g. {HUB_REPO}, or a local folder standing in for it (saved with "
        "save_to_disk, or data files load_dataset reads)",
    )
    source.add_argument(
        "--from-folder", metavar="DIR", type=Path, help="folder of images in the authors' naming scheme"
    )
    p.add_argument(
        "--metadata",
        type=Path,
        help="metadata .csv/.jsonl/.json, including the authors' JSON object keyed by image file name "
        "(default: DIR/metadata.*)",
    )
    p.add_argument("--split", help="hub split to read (default: all, concatenated)")
    p.add_argument(
        "--column-map",
        action="append",
        default=[],
        type=_column_map,
        metavar="SOURCE=FIELD",
        help="map or drop (SOURCE=-) a source column",
    )
    p.add_argument(
        "--prefer-metadata",
        action="store_true",
        help="where the metadata contradicts the file name (scene, target, replacement, condition), "
        "use the metadata's value and record each case in the card (default: an error)",
    )
    p.add_argument(
        "--box-format",
        action="append",
        default=[],
        metavar="[WHICH=]FORMAT",
        help="how the release stores target_bbox: xywh (default), xyxy or xwyh, for every row or for "
        "WHICH = generated (the inpainted images), original (original and clean) or one condition; "
        "repeatable. Rows are stored as [x, y, w, h]",
    )
    p.add_argument(
        "--accept-box-aspect",
        action="store_true",
        help="keep generated images' boxes whose aspect w/h is outside [0.5, 2] (the inpainting step's "
        "range), listing each in the card (default: an error)",
    )
    p.add_argument(
        "--skip-unmatched",
        action="store_true",
        help="leave out images without a metadata row and rows without an image, listing them in the "
        "card (default: an error)",
    )
    p.add_argument("--out", type=Path, help="output folder: data/*.parquet, README.md (card), tasks/*.yaml")
    p.add_argument("--name", help="suffix of the written task names (default: the --out folder's name)")
    p.add_argument("--push-to-hub", metavar="REPO", help="also push the dataset and its card to this hub repo")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create a private repo")
    p.set_defaults(fn=_build, command_name="build cooco", parser=p)


def _build(args) -> int:
    if not args.out and not args.push_to_hub:
        args.parser.error("give --out and/or --push-to-hub")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoocoBuildWarning)
        formats = cooco.box_formats(args.box_format)  # a bad --box-format: error line, exit 2
        dataset, label, notes = cooco.build(
            hub=args.from_hub,
            folder=args.from_folder,
            metadata=args.metadata,
            split=args.split,
            column_map=dict(args.column_map),
            prefer_metadata=args.prefer_metadata,
            skip_unmatched=args.skip_unmatched,
            box_format=formats,
            accept_aspect=args.accept_box_aspect,
        )
    for warning in caught:
        if issubclass(warning.category, CoocoBuildWarning):
            print(f"lmms-scene build cooco: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    decisions = [n for n in notes if not n.startswith("warning: ")]
    if decisions:
        print(f"lmms-scene build cooco: {len(decisions)} build decisions recorded in the card:", file=sys.stderr)
        for note in decisions[:20]:
            print(f"  {note}", file=sys.stderr)
        if len(decisions) > 20:
            print(f"  ... and {len(decisions) - 20} more", file=sys.stderr)
    card = cooco.card(dataset, label, notes=notes)
    chosen = cooco.selection(dataset)
    print(
        f"{chosen['release_rows']} rows, {chosen['evaluated']} naming items; the tasks leave out "
        f"{chosen['skipped_excluded']} excluded rows and {chosen['skipped_clean']} clean images (as the authors' "
        f"evaluation does; LMMS_SCENE_COOCO_CLEAN=include evaluates the clean ones too)"
    )
    if args.out:
        written = cooco.write_local(dataset, args.out, card, name=args.name)
        print(f"wrote {len(dataset)} rows to {written['data']} (card: {written['card']})")
        print(f"tasks: {', '.join(written['tasks'])} in {written['include_path']}")
        print("evaluate it with:")
        print("  " + cooco.evaluate_command(written))
        print("the blind baseline on it:")
        print("  " + cooco.evaluate_command(written, model="scene_blind", model_args=None))
    if args.push_to_hub:
        from datasets import DatasetDict  # deferred: datasets (pyarrow, pandas) is heavy to import
        from huggingface_hub import DatasetCard  # deferred: huggingface_hub is heavy to import

        DatasetDict({cooco.SPLIT: dataset}).push_to_hub(args.push_to_hub, private=args.private)
        DatasetCard(card).push_to_hub(args.push_to_hub)
        print(f"pushed {len(dataset)} rows to {args.push_to_hub}")
    return 0
