"""A benchmark dataset built on this machine, one printed command away from its results.

Every ``lmms-scene build NAME ... --out D`` writes the same layout, whatever the
benchmark:

- ``D/data/test-00000-of-00001.parquet`` (:data:`DATA_FILE`; a build with several splits,
  as SNUS's, writes each as ``data/<split>-00000-of-00001.parquet``): the hub layout, so
  ``datasets.load_dataset("D")`` reads it and pushing ``D`` to the hub publishes the
  same thing;
- ``D/README.md``: the dataset card (without ``configs`` in its front matter: see
  :func:`local_card`);
- ``D/tasks/*.yaml`` (:data:`TASKS_DIR`): lmms-scene's own tasks for the benchmark,
  written out in full (no ``include:``) with the data files swapped for the file above
  (relative to the YAML, so ``D`` can be moved as a whole), named ``<our task>_<name>``,
  declaring ``metadata.benchmark`` (so ``scene_blind``, ``show`` and ``rescore``
  recognise them by what they declare) and ``metadata.built_from``; optionally groups
  over them, modelled on one of our groups (same aggregate metrics);

and prints :func:`evaluate_command`. Nothing is written into the installed package.
A name that one of lmms-scene's own tasks or groups already has is an error naming it
(the harness would pick one of the two silently).

A builder reads the files a release names through :mod:`lmms_scene.data.release` (paths
inside the release folder only, images decoded in full), and its tasks re-check the rows
when they load them (:mod:`lmms_scene.data.recheck`): a new benchmark does the same.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lmms_scene.cache import cached
from lmms_scene.registration import dump_task_yaml, our_task_configs, read_task_yaml, tasks_path

#: where :func:`write_local` puts things inside its output folder
SPLIT = "test"
DATA_FILE = Path("data") / f"{SPLIT}-00000-of-00001.parquet"  # split_file(SPLIT)
TASKS_DIR = "tasks"


def split_file(split: str) -> Path:
    """Where a build writes ``split`` (the hub layout: ``data/<split>-00000-of-00001.parquet``)."""
    return Path("data") / f"{split}-00000-of-00001.parquet"


#: how every task file a build writes begins (a rebuild removes the earlier build's files)
_HEADER_START = "# Written by `lmms-scene build"


def slug(name: str, option: str = "--name") -> str:
    """``name`` as a task-name suffix: lower case, runs of anything but letters and digits
    as one ``_``. A name with no letter or digit is an error naming ``option``."""
    if not isinstance(name, str):
        raise TypeError(f"{option}: expected a string, got {name!r}")
    out = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not out:
        raise ValueError(f"{option}: {name!r} has no letters or digits to name a task with")
    return out


def our_names() -> dict[str, tuple[str, str]]:
    """Every task and group name lmms-scene ships: name -> (``task`` or ``group``, YAML path)."""
    names = {name: ("task", str(config.get("__yaml_path__", ""))) for name, config in our_task_configs().items()}
    for name, config in our_group_configs().items():
        names.setdefault(name, ("group", str(config.get("__yaml_path__", ""))))
    return names


def our_group_configs() -> dict[str, dict[str, Any]]:
    """Every group lmms-scene ships: name -> its YAML config (``!function`` kept as names)."""
    root = str(tasks_path())

    def read() -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for path in sorted(Path(root).rglob("*.yaml")):
            config = read_task_yaml(path)
            if isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
                found[config["group"]] = config | {"__yaml_path__": str(path)}
        return found

    return cached(("group-configs", root), read)


def check_free(names: Sequence[str], name: str, option: str = "--name") -> None:
    """Raise ``ValueError`` when one of ``names`` is already one of lmms-scene's own tasks
    or groups, naming the clash, its YAML file and the option to change."""
    ours = our_names()
    for candidate in names:
        if candidate in ours:
            kind, path = ours[candidate]
            raise ValueError(
                f"{option} {name!r}: {candidate!r} would be the name of a task or group this build writes, "
                f"but it is one of lmms-scene's own {kind}s ({path}); choose another {option}"
            )
    seen: set[str] = set()
    for candidate in names:
        if candidate in seen:
            raise ValueError(f"{option} {name!r}: this build would write {candidate!r} twice; choose another {option}")
        seen.add(candidate)


def _clean(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not k.startswith("__")}


def task_configs(out: Path, name: str, benchmark: str, bases: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The configs of the tasks ``<base>_<name>`` that evaluate the data written under
    ``out``: each of our tasks ``bases`` through :func:`task_config`. Does not check for
    clashes (:func:`check_free` does)."""
    ours = our_task_configs()
    configs = {}
    for base in bases:
        if base not in ours:
            raise KeyError(f"{base!r} is not one of lmms-scene's tasks (known: {', '.join(sorted(ours))})")
        config = task_config(ours[base], out, name, benchmark)
        configs[config["task"]] = config
    return configs


def task_config(base: Mapping[str, Any], out: Path, name: str, benchmark: str) -> dict[str, Any]:
    """The config of the task ``<base task>_<name>`` that evaluates the data written under
    ``out``: the task config ``base`` (ours, or a plugin benchmark's own YAML) written out in
    full, the data files swapped for :data:`DATA_FILE`, ``metadata.benchmark`` set to
    ``benchmark`` and ``metadata.built_from`` to ``out``."""
    config = _clean(base)
    config.update(
        task=f"{config['task']}_{slug(name)}",
        dataset_path="parquet",
        # relative to the YAML's folder, so the built folder can be moved as a whole
        dataset_kwargs={"data_files": {SPLIT: str(Path("..") / DATA_FILE)}},
        test_split=SPLIT,
    )
    config["metadata"] = {
        **(config.get("metadata") or {}),
        "benchmark": benchmark,
        "built_from": str(out),
    }
    return config


def group_config(group: str, tasks: Sequence[str], like: str, benchmark: str, out: Path) -> dict[str, Any]:
    """A group ``group`` over ``tasks`` with the aggregate metrics (and any other group
    setting) of our group ``like``, declaring ``metadata.benchmark``."""
    ours = our_group_configs()
    if like not in ours:
        raise KeyError(f"{like!r} is not one of lmms-scene's groups (known: {', '.join(sorted(ours))})")
    config = {"group": group, "task": list(tasks)}
    config.update({k: v for k, v in _clean(ours[like]).items() if k not in ("group", "task", "metadata")})
    config["metadata"] = {
        **(ours[like].get("metadata") or {}),
        "benchmark": benchmark,
        "built_from": str(out),
    }
    return config


def local_card(card: str) -> str:
    """``card`` as written into a built folder: its front matter without ``configs``.

    The hub and ``datasets`` find the split from the layout (``data/test-*`` is the
    ``test`` split), so ``configs`` adds nothing here, and with it ``datasets`` 5.2
    caches ``load_dataset("D")`` under a key made from the card alone (not the files):
    a folder rebuilt in place, or another folder with the same name and card, would load
    the old rows without a word. A card without front matter is returned as is."""
    if not card.startswith("---\n"):
        return card
    end = card.find("\n---", 4)
    if end < 0:
        return card
    meta = yaml.safe_load(card[4:end]) or {}
    if not isinstance(meta, dict) or "configs" not in meta:
        return card
    meta.pop("configs")
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + card[end + 1 :]


def write_local(
    dataset,
    out: str | Path,
    card: str,
    tasks: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    tool: str,
    headline: str | None = None,
) -> dict[str, Any]:
    """Write ``dataset`` to ``out`` in the layout above, with ``card`` and the task and
    group YAMLs (configs from :func:`task_configs` and :func:`group_config`).
    ``dataset`` is a ``datasets.Dataset`` (the test split, :data:`DATA_FILE`) or a mapping
    of split names to datasets, each written as :func:`split_file`; split files an
    earlier build wrote that this one does not are removed (``publish`` reads every file
    in ``data/``). ``tasks`` may be empty only for a mapping without a test split (there is
    nothing a task could evaluate). ``tool`` (``lmms-scene build NAME``) names the command
    in each YAML's header; task files an earlier build wrote into ``out/tasks`` are
    removed; ``headline`` is what :func:`evaluate_command` runs (default: the first group,
    else the first task). Returns the paths and names written (``data``: the test split's
    file or None, ``splits``: every file, ``card``, ``include_path``, ``tasks``,
    ``groups``, ``headline``)."""
    out = Path(out)
    splits = dict(dataset) if isinstance(dataset, Mapping) else {SPLIT: dataset}
    if not splits:
        raise ValueError("write_local: no split to write")
    if not tasks and (SPLIT in splits or not isinstance(dataset, Mapping)):
        raise ValueError("write_local: no task to write")
    if not str(tool).startswith("lmms-scene build "):
        raise ValueError(f"tool: expected 'lmms-scene build NAME', got {tool!r}")
    groups = dict(groups or {})
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    # an earlier build's split files (either layout) that this build does not write go
    for old in (out / DATA_FILE.parent).glob("*.parquet"):
        if old.name.split("-", 1)[0].split(".", 1)[0] not in splits:
            old.unlink()
    written = []
    for split, data in splits.items():
        path = out / split_file(split)
        stale = out / DATA_FILE.parent / f"{split}.parquet"  # the layout SNUS builds wrote before
        if stale.is_file():
            stale.unlink()
        data.to_parquet(str(path))
        written.append(path)
    (out / "README.md").write_text(local_card(card), encoding="utf-8")
    tasks_dir = out / TASKS_DIR
    tasks_dir.mkdir(exist_ok=True)
    # a rebuild under another --name: the task files an earlier build wrote go (only ours)
    for old in tasks_dir.glob("*.yaml"):
        with open(old, encoding="utf-8", errors="replace") as handle:
            if handle.readline().startswith(_HEADER_START):
                old.unlink()
    header = f"# Written by `{tool}`: evaluates {out.resolve() / DATA_FILE}.\n"
    for name, config in [*tasks.items(), *groups.items()]:
        (tasks_dir / f"{name}.yaml").write_text(header + dump_task_yaml(dict(config)), encoding="utf-8")
    return {
        "data": out / DATA_FILE if SPLIT in splits else None,
        "splits": written,
        "card": out / "README.md",
        "include_path": tasks_dir.resolve(),
        "tasks": list(tasks),
        "groups": list(groups),
        "headline": headline or (next(iter(groups)) if groups else next(iter(tasks), None)),
    }


def evaluate_command(
    written: Mapping[str, Any],
    model: str = "MODEL",
    model_args: str | None = "pretrained=CHECKPOINT",
    extra: Sequence[str] = (),
    tasks: str | None = None,
) -> str:
    """The ``lmms-scene eval`` command that evaluates what :func:`write_local` wrote
    (``tasks`` default: its headline); ``extra`` arguments go after the model's."""
    args = f" --model_args {model_args}" if model_args else ""
    more = "".join(f" {shlex.quote(a)}" for a in extra)
    headline = tasks or written.get("headline") or written["tasks"][0]
    return (
        f"lmms-scene eval --include_path {shlex.quote(str(written['include_path']))} "
        f"--tasks {headline} --model {model}{args}{more} --output_path results/ --log_samples"
    )
