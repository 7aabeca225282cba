"""Publishing a built dataset on the Hugging Face hub: validated, with its dataset card.

``lmms-scene build NAME ... --out D`` writes ``D/data/<split>[-...].parquet`` and
``D/README.md`` (:mod:`lmms_scene.data.local`). :func:`prepare` reads such a folder,
checks every split against the benchmark's explicit ``datasets.Features`` (the data
module's ``features()``: every column present with its declared type, no extra column,
no missing image) and composes the card (:func:`card`: source, license, splits with row
counts, features, citation; the builder's own card text kept below it). Then:

- :func:`write_folder` (``--dry-run``) writes exactly what would be pushed to a local
  folder: ``data/<split>-00000-of-00001.parquet``, ``README.md`` and ``publish.json``
  (the target repo, splits, row counts, features, checks);
- :func:`push` calls ``DatasetDict.push_to_hub`` and ``DatasetCard.push_to_hub`` (a thin
  call; nothing else differs from the dry run).

Nothing is published when a check fails; the error names the split, column (or row) and
what was found.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import __version__, benchmarks
from lmms_scene.data.card import front_matter, meta_of, read_card

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class Prepared:
    """A validated dataset ready to publish."""

    benchmark: str
    repo: str
    #: split name -> datasets.Dataset (features equal to the benchmark's)
    splits: dict[str, Any]
    card: str
    license: str
    source: str
    checks: list[str] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "benchmark": self.benchmark,
            "license": self.license,
            "source": self.source,
            "splits": {name: len(ds) for name, ds in self.splits.items()},
            "features": {name: repr(feature) for name, feature in next(iter(self.splits.values())).features.items()},
            "checks": self.checks,
        }


def check_repo(repo: str) -> str:
    if not isinstance(repo, str) or not _REPO.match(repo):
        raise ValueError(f"--repo: expected OWNER/NAME (letters, digits, '-', '_', '.'), got {repo!r}")
    return repo


def _data_module(benchmark: str):
    bench = benchmarks.get(benchmark)
    return bench, importlib.import_module(bench.data_module)


def _split_of(path: Path) -> str:
    # hub layout: data/<split>-00000-of-00001.parquet; older builds: data/<split>.parquet
    return re.sub(r"-\d{5}-of-\d{5}$", "", path.stem)


def read_splits(folder: str | Path) -> dict[str, Any]:
    """The splits of a built folder (``data/*.parquet``), shards of a split concatenated."""
    from datasets import Dataset, concatenate_datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

    folder = Path(folder)
    files = sorted((folder / "data").glob("*.parquet"))
    if not files:
        raise FileNotFoundError(
            f"{folder}: no data/*.parquet (build it first with `lmms-scene build ... --out {folder}`)"
        )
    grouped: dict[str, list[Path]] = {}
    for f in files:
        grouped.setdefault(_split_of(f), []).append(f)
    out = {}
    for split, paths in grouped.items():
        parts = [Dataset.from_parquet(str(p)) for p in paths]
        out[split] = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
    return out


def validate_features(splits: Mapping[str, Any], features: Any) -> list[str]:
    """Check every split against ``features``; returns the checks passed, raises
    ``ValueError`` naming split, column and what was found on the first failure."""
    from datasets import Image  # deferred: datasets (pyarrow, pandas) is heavy to import

    checks = []
    expected = dict(features)
    for split, ds in splits.items():
        found = dict(ds.features)
        missing = [c for c in expected if c not in found]
        extra = [c for c in found if c not in expected]
        if missing:
            raise ValueError(f"split {split!r}: missing column(s) {missing} (the schema has {list(expected)})")
        if extra:
            raise ValueError(f"split {split!r}: column(s) {extra} are not in the schema {list(expected)}")
        for name, feature in expected.items():
            if found[name] != feature:
                raise ValueError(f"split {split!r}: column {name!r}: expected {feature!r}, found {found[name]!r}")
        for name, feature in expected.items():
            if isinstance(feature, Image):
                column = ds.data.column(name)
                if column.null_count:
                    row = next(i for i, v in enumerate(column.to_pylist()) if v is None)
                    raise ValueError(f"split {split!r}: row {row}: column {name!r}: no image")
        if len(ds) == 0:
            raise ValueError(f"split {split!r}: no rows")
        checks.append(f"split {split!r}: {len(ds)} rows, {len(expected)} columns match the {type(features).__name__}")
    return checks


def card(
    benchmark: str,
    splits: Mapping[str, Any],
    *,
    license: str,
    source: str,
    built_card: str = "",
    terms: str | None = None,
) -> str:
    """The dataset card pushed with the data (:mod:`lmms_scene.data.card`): front matter
    (license, the configs pointing at each split's files, source), then source, license,
    splits, features and the paper's citation (from the registry), then the builder's own
    card body (build decisions, field meanings). ``terms``: the license in words."""
    bench = benchmarks.get(benchmark)
    _, body = read_card(built_card) if built_card else ({}, "")
    features = next(iter(splits.values())).features
    lines = [
        f"# {bench.title}",
        "",
        f"Published with lmms-scene {__version__} (`lmms-scene publish {bench.cli_name}`). Paper: {bench.paper}.",
        "",
        "## Source",
        "",
        source,
        "",
        "## License",
        "",
        f"`{license}`" + (f": {terms}" if terms and terms != license else ""),
        "",
        "## Splits",
        "",
        "| split | rows |",
        "|---|---|",
        *(f"| {s} | {len(ds)} |" for s, ds in splits.items()),
        "",
        "## Features",
        "",
        *(f"- `{name}`: `{feature!r}`" for name, feature in features.items()),
        "",
        "## Citation",
        "",
        "```bibtex",
        bench.citation,
        "```",
    ]
    text = (
        front_matter(license=license, source=source, pretty_name=bench.title, splits=list(splits), license_terms=terms)
        + "\n".join(lines)
        + "\n"
    )
    if body.strip():
        text += "\n## Build card\n\n" + body.rstrip() + "\n"
    return text


def prepare(
    benchmark: str, folder: str | Path, repo: str, *, source: str | None = None, license: str | None = None
) -> Prepared:
    """Read and validate a built folder; compose its card. ``source``/``license`` default
    to what the built card says (its ``Source:`` line; its front matter ``license``),
    else the folder and ``other``."""
    bench, module = _data_module(benchmark)
    check_repo(repo)
    folder = Path(folder)
    splits = read_splits(folder)
    checks = validate_features(splits, module.features())

    built = (folder / "README.md").read_text(encoding="utf-8") if (folder / "README.md").is_file() else ""
    front, _ = read_card(built) if built else ({}, "")
    license = license or meta_of(front, "license") or "other"
    terms = meta_of(front, "license_terms")
    source = source or meta_of(front, "source") or f"built by lmms-scene from {folder.resolve()}"
    text = card(bench.name, splits, license=license, source=source, built_card=built, terms=terms)
    return Prepared(bench.name, repo, splits, text, license, source, checks)


def write_folder(prepared: Prepared, out: str | Path) -> list[Path]:
    """The dry run: everything :func:`push` would upload, written under ``out``."""
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    written = []
    for split, ds in prepared.splits.items():
        path = out / "data" / f"{split}-00000-of-00001.parquet"
        ds.to_parquet(str(path))
        written.append(path)
    (out / "README.md").write_text(prepared.card, encoding="utf-8")
    (out / "publish.json").write_text(json.dumps(prepared.manifest(), indent=2) + "\n", encoding="utf-8")
    return [*written, out / "README.md", out / "publish.json"]


def push(prepared: Prepared, *, private: bool = False, token: str | None = None) -> str:
    """Push the data and its card to ``prepared.repo`` (needs the network and a token)."""
    from datasets import DatasetDict  # deferred: datasets (pyarrow, pandas) is heavy to import
    from huggingface_hub import DatasetCard  # deferred: huggingface_hub is heavy to import

    DatasetDict(prepared.splits).push_to_hub(prepared.repo, private=private, token=token)
    DatasetCard(prepared.card).push_to_hub(prepared.repo, token=token)
    return f"https://huggingface.co/datasets/{prepared.repo}"


def build_from_source(
    benchmark: str, out: str | Path, *, folder: Path | None = None, hub: str | None = None, metadata: Path | None = None
) -> tuple[Path, str]:
    """Run the benchmark's builder (the registry's ``builder``) into ``out`` (the layout
    :func:`prepare` reads); returns the folder and a sentence naming the source."""
    bench = benchmarks.get(benchmark)
    if not bench.builder:
        raise ValueError(f"publish {bench.cli_name}: {bench.title} has no builder; give --dataset D (a built folder)")
    return benchmarks.resolve(bench.builder)(Path(out), folder=folder, hub=hub, metadata=metadata)
