"""What the Layered-VQA tasks need from a dataset: the task documents of a schedule
(:func:`schedule_docs`, every row re-checked), and the placeholder the shipped schedule
tasks read until their data location is set.
"""

from __future__ import annotations

import hashlib as _hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene.data import recheck, release
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, deliver
from lmms_scene.data.layered_vqa.rounds import MAX_ROUNDS
from lmms_scene.data.layered_vqa.schema import (
    COLUMNS,
    QUESTION_TYPES,
    item_where,
    repeated,
    validate,
)

# -- task documents --------------------------------------------------------------------


def schedule_docs(dataset, schedules: Sequence[str], seed: int = 0):
    """The task documents: every item under every schedule in ``schedules`` (item-major,
    so ``--limit len(schedules)`` runs one item under each), with ``schedule``, ``n_layers``
    and ``seed`` columns. Before the model runs: the shipped placeholder stops the run
    with :func:`not_built_message`; a missing column, a repeated item id or an item
    needing more than :data:`MAX_ROUNDS` turns under a schedule is an error naming it;
    every row is re-checked (:func:`loaded_row_problem`: images decoded in full, the
    schema of :func:`validate`) and a bad one becomes a stand-in carrying its reason
    (:mod:`lmms_scene.data.recheck`), recorded unscored by ``process_results``."""
    unknown = [s for s in schedules if s not in SCHEDULES]
    if unknown or not schedules:
        raise ValueError(f"schedules: unknown or none {unknown or list(schedules)}; known: {', '.join(SCHEDULES)}")
    dataset = ensure_schema(dataset)
    # the round cap from the text columns only (no image is decoded again)
    texts = dataset.select_columns([c for c in dataset.column_names if c not in ("composite", "layers")])
    names = texts["layer_names"]
    for k, row in enumerate(texts):
        if recheck.problem_of(row):
            continue
        row = {**row, "n_layers": len(names[k])}
        for schedule in schedules:
            n_turns = len(deliver(row, schedule, seed, check=False))
            if n_turns > MAX_ROUNDS:
                raise ValueError(
                    f"row {k}: {item_where(row)}: schedule {schedule!r} needs {n_turns} turns, more than the "
                    f"{MAX_ROUNDS} rounds lmms-scene runs (MAX_ROUNDS); split the question into fewer shards"
                )
    n = len(dataset)
    index = [k for k in range(n) for _ in schedules]
    out = dataset.select(index)
    out = out.add_column("schedule", [s for _ in range(n) for s in schedules])
    out = out.add_column("n_layers", [len(names[k]) for k in index])
    return out.add_column("seed", [int(seed)] * len(index))


def ensure_schema(dataset):
    """Check a loaded split before the model runs (the load-time check of the benchmark
    contract, :class:`lmms_scene.contract.DataModule`): the shipped placeholder stops the run
    with :func:`not_built_message`; a missing column or a repeated item id is an error naming
    it; every row is re-checked (:func:`loaded_row_problem`) and a bad one becomes a stand-in
    carrying its reason. The dataset is returned as is when every row is good."""
    check_built(dataset)
    missing = [c for c in COLUMNS if c not in dataset.column_names]
    if missing:
        raise ValueError(
            f"Layered-VQA data lacks the fields {missing}; it has {dataset.column_names}. "
            "Build it with `lmms-scene build layered-vqa` (or layered-synth)."
        )
    ids = list(zip(dataset["scene_id"], dataset["question_id"]))
    twice = repeated(ids)
    if twice:
        first = ids.index(twice[0])
        raise ValueError(
            f"row {ids.index(twice[0], first + 1)}: item {twice[0][1]!r} (scene {twice[0][0]!r}) repeats row "
            f"{first} (rows are keyed by scene and question id)"
        )
    return recheck.screen(
        dataset,
        _row_checker(),
        _stand_in,
        what="the Layered-VQA dataset",
        memo_key=("layered_vqa", getattr(dataset, "_fingerprint", None), len(dataset)),
    )


def _row_checker():
    """:func:`loaded_row_problem` with a cache of decoded images for one pass (the
    questions of a scene share its images)."""
    decoded: dict[str, Any] = {}

    def check(row: Mapping[str, Any], index: int) -> str | None:
        return loaded_row_problem(row, index, decoded)

    return check


def loaded_row_problem(row: Mapping[str, Any], index: int, decoded: dict[str, Any] | None = None) -> str | None:
    """Why a loaded Layered-VQA row (undecoded) cannot be evaluated, or None: the
    composite and every layer decoded in full (``decoded`` caches them by content), then
    :func:`validate` with the images (question type, shards, layer indices, sizes)."""
    where = f"row {index}: {item_where(row)}"
    cache = decoded if decoded is not None else {}

    def image(cell: Any, field: str, mode: str):
        data, _ = release.image_cell_bytes(cell, where, field, release.hub_roots())
        key = _hashlib.sha256(data).hexdigest() + mode
        if key not in cache:
            name = (
                Path(str(cell["path"])).name if isinstance(cell, Mapping) and cell.get("path") else "(the row's bytes)"
            )
            try:
                cache[key] = release.decode_image(data, name).convert(mode)
            except ValueError as exc:
                cache[key] = ValueError(f"{where}: field {field!r}: {exc}")
        if isinstance(cache[key], Exception):
            raise cache[key]
        return cache[key]

    try:
        layers = row.get("layers")
        if not isinstance(layers, list) or not layers:
            return f"{where}: field 'layers': expected at least one layer image, got {type(layers).__name__}"
        item = dict(row)
        item["composite"] = image(row.get("composite"), "composite", "RGB")
        item["layers"] = [image(cell, f"layers[{k}]", "RGBA") for k, cell in enumerate(layers)]
        validate(item)
    except (ValueError, OSError, TypeError) as exc:
        text = str(exc)
        return text if text.startswith(f"row {index}") else f"row {index}: {text}"
    return None


def _stand_in(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Layered-VQA item standing in for a bad one: its ids and answer where they are
    strings, one grey layer (its own composite), one shard, and the notice
    :data:`lmms_scene.data.recheck.UNUSABLE_PROMPT` as the question."""
    text = recheck.text
    kind = row.get("question_type") if row.get("question_type") in QUESTION_TYPES else QUESTION_TYPES[0]
    return {
        "scene_id": text(row.get("scene_id")) or f"unusable_scene_{index:06d}",
        "question_id": text(row.get("question_id")) or f"unusable_row_{index:06d}",
        "question_type": kind,
        "question": recheck.UNUSABLE_PROMPT,
        "answer": text(row.get("answer")),
        "composite": recheck.stand_in_image("RGB"),
        "layers": [recheck.stand_in_image("RGBA")],
        "layer_names": ["background"],
        "shards": [{"text": recheck.UNUSABLE_PROMPT, "supporting_layers": []}],
        "minimal_sufficient_layers": [0],
        "distractor_layers": [],
    }


# -- the shipped schedule tasks' data location ------------------------------------------

#: The file the shipped ``layered_vqa_<schedule>`` tasks and the ``layered_vqa`` group read
#: (relative to the task folder) until someone sets their data location, the one place
#: being ``dataset_path`` / ``dataset_kwargs`` in ``tasks/layered_vqa/_default_template_yaml``:
#: one row, one column (:data:`PLACEHOLDER_COLUMN`). The public hub location of the
#: dataset is not known yet; ``process_docs`` (:func:`schedule_docs`) sees the placeholder
#: and stops the run before the model is loaded, with :func:`not_built_message`.
PLACEHOLDER_FILE = Path("placeholder") / "not_built.parquet"
PLACEHOLDER_COLUMN = "lmms_scene_layered_vqa_placeholder"


def not_built_message() -> str:
    """What a run of the shipped schedule tasks says while they read the placeholder."""
    return (
        "Layered-VQA: the shipped tasks layered_vqa_<schedule> and the group layered_vqa read "
        f"tasks/layered_vqa/{PLACEHOLDER_FILE.as_posix()}, a placeholder: the public location of the dataset "
        "is not set in this version. Build the data into a folder of your own, then run the command the "
        "build prints (its own tasks, layered_vqa_<schedule>_NAME and the group layered_vqa_NAME):\n"
        "  lmms-scene build layered-synth --scenes 20 --seed 0 --out DIR --name NAME   (generated scenes)\n"
        "  lmms-scene build layered-vqa --release RELEASE --out DIR --name NAME      (a release folder; "
        "layout in docs/layered_vqa.md)\n"
        "  lmms-scene eval --include_path DIR/tasks --tasks layered_vqa_NAME --model ... --batch_size 1 "
        "--output_path results/ --log_samples\n"
        "Or point the shipped tasks at data: set dataset_path/dataset_kwargs in "
        "tasks/layered_vqa/_default_template_yaml (lmms-scene tasks-path prints the folder) to "
        "DIR/data/test-00000-of-00001.parquet or to the hub dataset. "
        "layered_vqa_sample (the embedded sample) runs as it is."
    )


def write_placeholder(folder: str | Path) -> Path:
    """Write :data:`PLACEHOLDER_FILE` under ``folder`` (the task folder)."""
    from datasets import Dataset  # deferred: datasets (pyarrow, pandas) is heavy to import

    path = Path(folder) / PLACEHOLDER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_dict({PLACEHOLDER_COLUMN: ["Layered-VQA data not set: see not_built_message()"]}).to_parquet(str(path))
    return path


def check_built(dataset) -> None:
    """Raise ``FileNotFoundError`` (:func:`not_built_message`) when ``dataset`` is the
    placeholder rather than Layered-VQA items."""
    if PLACEHOLDER_COLUMN in (getattr(dataset, "column_names", None) or ()):
        raise FileNotFoundError(not_built_message())
