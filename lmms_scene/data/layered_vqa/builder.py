"""Building a Layered-VQA dataset: from a local release (every scene's layers checked to
recompose its composite, every item validated) or from the scene generator, written as a
local build (:mod:`lmms_scene.data.local`) with the tasks that evaluate it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import compositing
from lmms_scene.data import local
from lmms_scene.data import release as files
from lmms_scene.data.layered_vqa import schedules as _schedules
from lmms_scene.data.layered_vqa import synth
from lmms_scene.data.layered_vqa.card import card
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, deliver
from lmms_scene.data.layered_vqa.rounds import MAX_LAYERS, MAX_ROUNDS
from lmms_scene.data.layered_vqa.sample import build_sample  # noqa: F401 (the registry's data_module hook)
from lmms_scene.data.layered_vqa.schema import (
    COLUMNS,
    features,
    item_where,
    repeated,
    validate,
)
from lmms_scene.data.layered_vqa.views import ensure_schema, loaded_row_problem  # noqa: F401 (the contract's load-time checks)
from lmms_scene.files import iter_jsonl

# -- building a dataset from a local release --------------------------------------------

#: what a release folder holds (docs/layered_vqa.md, "Building from a release")
RELEASE_LAYOUT = """\
RELEASE/
  questions.jsonl            one question per line: scene_id, question_id, question_type, question,
                             answer, shards [{text, supporting_layers}], minimal_sufficient_layers,
                             distractor_layers
  scenes/<scene_id>/composite.png
  scenes/<scene_id>/layers/<k>_<name>.png   k = 0 (background), 1, 2, ... back to front
"""


@dataclass(frozen=True)
class BuildReport:
    """What a build wrote: ``out`` the parquet file, ``card`` its card, and (for a local
    build, :func:`write_local`) ``written``: the task folder, task and group names."""

    rows: int
    scenes: int
    max_difference: dict[str, int]
    out: Path
    card: Path
    written: Mapping[str, Any] = field(default_factory=dict)

    @property
    def include_path(self) -> Path:
        return self.written["include_path"]

    @property
    def tasks(self) -> list[str]:
        return list(self.written.get("tasks", ()))

    @property
    def groups(self) -> list[str]:
        return list(self.written.get("groups", ()))


def _read_questions(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no question file (expected layout:\n{RELEASE_LAYOUT})")

    out = []
    for lineno, record in iter_jsonl(path):
        record["_line"] = lineno
        out.append(record)
    if not out:
        raise ValueError(f"{path}: no questions")
    return out


def _release_image(release: Path, path: Path, mode: str, where: str):
    """One image file of the release: confined to the release folder (a symbolic link
    out of it is refused), decoded in full, converted to ``mode``."""
    relative = path.relative_to(release).as_posix()
    _, data = files.read_file(release, relative, where, "image")
    try:
        return files.decode_image(data, str(path)).convert(mode)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _scene_images(folder: Path, scene_id: str):
    where = f"scene {scene_id!r}"
    if "/" in scene_id or "\\" in scene_id:
        raise ValueError(f"{where}: field 'scene_id': a scene id names one folder under scenes/, got {scene_id!r}")
    scene_dir = files.inside(folder, f"scenes/{scene_id}", where, "scene_id")
    comp_path = scene_dir / "composite.png"
    if not comp_path.is_file():
        raise FileNotFoundError(f"scene {scene_id!r}: {comp_path} not found")
    files_ = []
    for p in sorted((scene_dir / "layers").glob("*.png")):
        head, _, name = p.stem.partition("_")
        if not head.isdigit():
            raise ValueError(
                f"scene {scene_id!r}: layer file {p.name} does not start with its index (e.g. 0_background.png)"
            )
        files_.append((int(head), name or f"layer {head}", p))
    files_.sort()
    if not files_:
        raise FileNotFoundError(f"scene {scene_id!r}: no layer PNGs in {scene_dir / 'layers'}")
    indices = [k for k, _, _ in files_]
    if indices != list(range(len(files_))):
        raise ValueError(f"scene {scene_id!r}: layer indices {indices} are not 0..{len(files_) - 1}")
    if len(files_) > MAX_LAYERS:
        raise ValueError(
            f"scene {scene_id!r}: {len(files_)} layers, more than the {MAX_LAYERS} a scene may have: the recap-v "
            f"schedule delivers a scene in one turn per layer plus one, and lmms-scene runs at most {MAX_ROUNDS} "
            f"rounds (MAX_ROUNDS); merge layers or split the scene"
        )
    layers = [_release_image(folder, p, "RGBA", f"scene {scene_id!r}: layer {k}") for k, _, p in files_]
    for k, layer in enumerate(layers):
        if layer.size != layers[0].size:
            raise ValueError(
                f"scene {scene_id!r}: layer {k} ({files_[k][2].name}) is {layer.size[0]}x{layer.size[1]}, layer 0 is {layers[0].size[0]}x{layers[0].size[1]}"
            )
    composite = _release_image(folder, comp_path, "RGB", f"scene {scene_id!r}: composite")
    return composite, layers, [n for _, n, _ in files_]


def max_turns(item: Mapping[str, Any]) -> tuple[int, str]:
    """The most turns any schedule delivers ``item`` in, and that schedule."""
    counts = [(len(deliver(item, name, check=False)), name) for name in SCHEDULES]
    return max(counts, key=lambda c: c[0])


def release_items(
    release: str | Path, tolerance: int = compositing.DEFAULT_TOLERANCE
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The validated items of a local release folder (:data:`RELEASE_LAYOUT`) and the max
    pixel difference per scene. Every file is read inside the release folder (no
    ``..``, no symbolic link out of it) and decoded in full; every scene's layers must
    alpha-composite back to its composite within ``tolerance``, every referenced layer
    index must exist, every schedule must fit in :data:`MAX_ROUNDS` turns, question ids
    must be unique; an error names the scene or the question and its line."""
    release = Path(release)
    if (release / "questions.jsonl").is_file():  # not a link out of the release
        files.inside(release, "questions.jsonl", "the release", "questions.jsonl")
    questions = _read_questions(release / "questions.jsonl")
    scenes: dict[str, Any] = {}
    diffs: dict[str, int] = {}
    items = []
    for q in questions:
        where = f"questions.jsonl line {q['_line']}"
        scene_id = q.get("scene_id")
        if not isinstance(scene_id, str) or not scene_id:
            raise ValueError(f"{where}: scene_id: expected a non-empty string, got {scene_id!r}")
        if scene_id not in scenes:
            try:
                composite, layers, names = _scene_images(release, scene_id)
            except (ValueError, FileNotFoundError) as err:
                raise type(err)(f"{where}: {err}") from None
            check = compositing.check_recomposition(layers, composite, tolerance, name=f"scene {scene_id!r}")
            diffs[scene_id] = check.max_difference
            scenes[scene_id] = (composite, layers, names)
        composite, layers, names = scenes[scene_id]
        item = {k: q.get(k) for k in COLUMNS if k not in ("composite", "layers", "layer_names")}
        item.update(composite=composite, layers=layers, layer_names=names)
        for key in ("shards", "minimal_sufficient_layers", "distractor_layers"):
            if item[key] is None:
                raise ValueError(f"{where}: {item_where(item)}: missing field {key!r}")
        if not isinstance(item["shards"], list):
            raise ValueError(
                f"{where}: {item_where(item)}: shards: expected a list of {{text, supporting_layers}}, got {item['shards']!r}"
            )
        item["shards"] = [
            {"text": s.get("text"), "supporting_layers": list(s.get("supporting_layers") or [])}
            if isinstance(s, Mapping)
            else s
            for s in item["shards"]
        ]
        try:
            validate(item)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        turns, schedule = max_turns(item)
        if turns > MAX_ROUNDS:
            raise ValueError(
                f"{where}: {item_where(item)}: schedule {schedule!r} needs {turns} turns, more than the {MAX_ROUNDS} rounds "
                f"lmms-scene runs (MAX_ROUNDS): every evaluation of this release would fail; split the question into "
                f"fewer shards (at most {MAX_ROUNDS - 1})"
            )
        items.append(item)
    dupes = repeated([i["question_id"] for i in items])
    if dupes:
        raise ValueError(f"questions.jsonl: repeated question_id {dupes[:5]}")
    return items, diffs


def build_release(
    release: str | Path,
    out: str | Path,
    tolerance: int = compositing.DEFAULT_TOLERANCE,
    source: str = "local release",
    name: str | None = None,
) -> BuildReport:
    """``lmms-scene build layered-vqa``: a local release folder (:data:`RELEASE_LAYOUT`,
    checked by :func:`release_items`) written to the folder ``out`` with its card and
    the tasks that evaluate it (:func:`write_local`; ``name`` default: the folder's
    name). Nothing is written when a check fails."""
    items, diffs = release_items(release, tolerance)
    text = card(items, source, max_difference=max(diffs.values()), tolerance=tolerance)
    written = write_local(items, out, text, name=name, tool="lmms-scene build layered-vqa")
    return BuildReport(len(items), len(diffs), diffs, written["data"], written["card"], written)


def build_synthetic(
    out: str | Path, scenes: int, seed: int = 0, size: tuple[int, int] = (320, 240), name: str | None = None
) -> BuildReport:
    """``lmms-scene build layered-synth``: generated scenes written to the folder ``out``
    with their card and the tasks that evaluate them (:func:`write_local`)."""
    items = synth.generate(scenes, seed, size)
    text = card(
        items,
        f"lmms-scene procedural generator (lmms_scene.data.layered_vqa.synth), {scenes} scenes, seed {seed}, {size[0]}x{size[1]}",
        max_difference=0,
        tolerance=0,
        license="CC0-1.0 (generated by lmms-scene)",
        license_id="cc0-1.0",
    )
    written = write_local(items, out, text, name=name, tool="lmms-scene build layered-synth")
    return BuildReport(len(items), len({i["scene_id"] for i in items}), {}, written["data"], written["card"], written)


# -- a locally built dataset, ready to evaluate (lmms_scene.data.local) -----------------

#: our group a local build models its group on (same aggregate metrics)
GROUP = _schedules.GROUP


def local_names(name: str) -> tuple[list[str], str]:
    """The task names (``layered_vqa_<schedule>_NAME``, in schedule order) and the group
    name (``layered_vqa_NAME``) of a local build called ``name``."""
    suffix = local.slug(name)
    return [f"{task}_{suffix}" for task in _schedules.TASKS], f"{GROUP}_{suffix}"


def local_task_configs(out: Path, name: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The task configs (the 16 schedule tasks) and the group config that evaluate the
    dataset written under ``out``: our own tasks with the data files swapped, written out
    in full, declaring ``metadata.benchmark: layered_vqa``; the group with our
    ``layered_vqa`` group's aggregate metrics. A name that one of lmms-scene's own tasks
    or groups has (``--name sample`` makes the group ``layered_vqa_sample``) is an error
    naming it."""
    tasks, group = local_names(name)
    local.check_free([*tasks, group], name)
    # our generated schedule tasks (tasks/layered_vqa/_generate_config.py writes them from the
    # same table), copied in full with the data swapped: a local build cannot diverge from them
    configs = local.task_configs(out, name, "layered_vqa", list(_schedules.TASKS))
    return configs, {group: local.group_config(group, list(configs), GROUP, "layered_vqa", out)}


def write_local(
    dataset, out: str | Path, card: str, name: str | None = None, tool: str = "lmms-scene build layered-vqa"
) -> dict[str, Any]:
    """Write Layered-VQA items (or a ``datasets.Dataset`` in :func:`features`) to the
    folder ``out`` (layout: :mod:`lmms_scene.data.local`) with ``card``, the 16 schedule
    tasks and the group (:func:`local_task_configs`; ``name`` default: the folder's
    name). Names are checked before anything is written."""
    from datasets import Dataset  # deferred: datasets (pyarrow, pandas) is heavy to import

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file; give a folder (it gets data/, README.md and tasks/)")
    tasks, groups = local_task_configs(out.resolve(), name or out.resolve().name)
    if not isinstance(dataset, Dataset):
        dataset = Dataset.from_list(list(dataset), features=features())
    return local.write_local(dataset, out, card, tasks, groups, tool=tool)


#: how the printed command runs a model with native multi-round support (docs/layered_vqa.md)
MULTI_ROUND_MODEL = ("qwen2_5_vl", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct", ("--force_simple", "--batch_size", "1"))


def evaluate_commands(written: Mapping[str, Any]) -> dict[str, str]:
    """The commands that evaluate a local build: ``model`` (a multi-round-capable model,
    the simple ``qwen2_5_vl`` class at batch size 1) and ``scene_blind`` (the text-prior
    baseline); both run the group (all 16 schedules)."""
    model, args, extra = MULTI_ROUND_MODEL
    return {
        "model": local.evaluate_command(written, model=model, model_args=args, extra=extra),
        "scene_blind": local.evaluate_command(written, model="scene_blind", model_args=None),
    }


def publish_build(out, *, folder=None, hub=None, metadata=None):
    """``lmms-scene publish layered-vqa --from-folder RELEASE``: build into ``out``."""
    if hub is not None:
        raise ValueError("publish layered-vqa: --from-hub is only for cooco; give --from-folder DIR or --dataset D")
    if folder is None:
        raise ValueError("publish layered-vqa: give --from-folder DIR or --dataset D")
    if metadata is not None:
        raise ValueError("publish layered-vqa: --metadata does not apply (the release folder holds its items)")
    build_release(folder, out, source=str(folder), name="publish")
    return out, f"built by `lmms-scene publish layered-vqa` from the local release {folder.resolve()}"
