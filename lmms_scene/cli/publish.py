"""``publish {cooco,snus,layered-vqa} --repo OWNER/NAME``: a built dataset on the hub.

The dataset comes from an already built folder (``--dataset D``, written by ``lmms-scene
build NAME ... --out D``) or is built first from the sources the builder takes
(``--from-folder DIR`` [``--metadata FILE``]; COOCO also ``--from-hub REPO``; for
Layered-VQA ``--from-folder`` is the release folder). Every split is checked against the
benchmark's ``datasets.Features`` and the card (source, license, splits, features,
citation) is written before anything is pushed. ``--dry-run OUT`` writes what would be
pushed to the folder OUT instead (no network). See docs/reports.md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lmms_scene import benchmarks
from lmms_scene.report import publish


def register(sub) -> None:
    p = sub.add_parser(
        "publish",
        help="validate a built dataset, write its card and push it to the hub",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("benchmark", choices=[b.cli_name for b in benchmarks.BENCHMARKS if b.builder])
    p.add_argument("--repo", required=True, help="hub dataset repo, OWNER/NAME")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--dataset", type=Path, metavar="D", help="a folder written by `lmms-scene build NAME ... --out D`"
    )
    src.add_argument("--from-folder", type=Path, metavar="DIR", help="build first from this local release folder")
    src.add_argument("--from-hub", metavar="REPO", help="COOCO only: build first from this hub release")
    p.add_argument("--metadata", type=Path, help="with --from-folder (COOCO, SNUS): the metadata file")
    p.add_argument("--source", help="where the data came from, for the card (default: what the build recorded)")
    p.add_argument("--license", help="license for the card's front matter (default: the built card's, else 'other')")
    p.add_argument("--dry-run", type=Path, metavar="OUT", help="write everything to the folder OUT instead of pushing")
    p.add_argument("--private", action="store_true", help="create a private hub repo")
    p.set_defaults(fn=_publish, command_name="publish")


def _publish(a) -> int:
    publish.check_repo(a.repo)
    with tempfile.TemporaryDirectory(prefix="lmms-scene-publish-") as tmp:
        folder, source = a.dataset, a.source
        if folder is None:
            folder, built_from = publish.build_from_source(
                a.benchmark, Path(tmp) / "built", folder=a.from_folder, hub=a.from_hub, metadata=a.metadata
            )
            source = source or built_from
        prepared = publish.prepare(a.benchmark, folder, a.repo, source=source, license=a.license)
        for line in prepared.checks:
            print(f"checked {line}")
        if a.dry_run is not None:
            written = publish.write_folder(prepared, a.dry_run)
            print(f"dry run: wrote what would be pushed to {a.repo} under {a.dry_run}:")
            for path in written:
                print(f"  {path}")
            return 0
        url = publish.push(prepared, private=a.private)
    print(
        f"pushed {sum(len(d) for d in prepared.splits.values())} rows ({', '.join(prepared.splits)}) and the card to {url}"
    )
    return 0
