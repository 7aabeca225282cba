"""``scene_from_samples``: answers every request with the answer a saved run logged.

``lmms-scene rescore RUN`` runs the harness with this model over a saved run's samples
files (``--log_samples`` output) or over the journal of an interrupted ``lmms-scene
eval`` (:mod:`lmms_scene.journal`), so every metric is recomputed by the tasks' own
``process_results`` and aggregations, on the same data, without the model that
generated the answers. lmms-eval's own ``from_log`` model reads an older log format
(not 0.7.3's samples JSONL), hence this one.

Every repeat of a ``--repeats`` run is replayed as logged: the harness asks for each
document's repeats as copies of one request, one after the other, and the k-th copy gets
the k-th logged answer. Where the samples file holds one answer for several repeats (a
task whose filter keeps the first, lmms-eval's ``take_first``, logs only that one, and
only that one was ever scored), that answer is replayed for each copy and the replay says
so (:attr:`SceneFromSamples.single_logged`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import compat
from lmms_scene import journal as J
from lmms_scene.files import iter_jsonl
from lmms_scene.models._base import Instance, lmms


def task_of_samples_file(path: Path) -> str:
    """``<date>_samples_<task>.jsonl`` -> ``<task>``."""
    name = path.name
    if "_samples_" not in name or not name.endswith(".jsonl"):
        raise ValueError(f"{path}: not an lmms-eval samples file (<date>_samples_<task>.jsonl)")
    return name[: -len(".jsonl")].split("_samples_", 1)[1]


def samples_files(paths: str | Path | list) -> list[Path]:
    """The samples files in ``paths`` (files, or folders searched recursively); the
    newest file per task when a folder holds several runs."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    found: dict[str, Path] = {}
    for item in map(Path, items):
        files = sorted(item.rglob("*_samples_*.jsonl")) if item.is_dir() else [item]
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"{f}: no such samples file")
            task = task_of_samples_file(f)
            if task not in found or f.name > found[task].name:
                found[task] = f
    if not found:
        raise FileNotFoundError(
            f"no *_samples_*.jsonl under {', '.join(map(str, items))} (was the run made with --log_samples?)"
        )
    return [found[t] for t in sorted(found)]


def results_file_of(samples_file: Path) -> Path:
    """The results JSON the harness wrote beside a samples file (same date prefix)."""
    prefix = samples_file.name.split("_samples_", 1)[0]
    return samples_file.with_name(f"{prefix}_results.json")


# -- the run's options ------------------------------------------------------------------------

#: lmms-eval 0.7.3's default --reasoning_tags (on unless a run says "none")
DEFAULT_REASONING_TAGS = '[["<think>", "</think>"], ["<analysis>", "</analysis>"]]'


def _tags_active(value: Any) -> bool:
    return not (value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", "none")))


@dataclass
class RunOptions:
    """The options of a saved run that decide its numbers when its answers are replayed:
    which tasks (the ``--tasks`` string as given, and the leaf tasks it ran), which
    documents (``--limit``, ``--offset``), how many samples each (``--repeats``, and each
    task's effective repeats), what is stripped before scoring (``--reasoning_tags``),
    where the tasks live (``--include_path``) and the seeds. ``source`` names the file
    they were read from."""

    source: str
    tasks: str | None = None
    leaf_tasks: list[str] = field(default_factory=list)
    limit: Any = None
    offset: int = 0
    repeats: int | None = None
    task_repeats: dict[str, int] = field(default_factory=dict)
    reasoning_tags: Any = DEFAULT_REASONING_TAGS
    task_reasoning_tags: dict[str, Any] = field(default_factory=dict)
    include_path: str | None = None
    seed: Any = None
    model: str | None = None
    model_args: str | None = None

    #: the options that must agree between runs rescored together (the task lists are joined)
    NUMBERS = ("limit", "offset", "repeats", "reasoning_tags", "include_path", "seed")

    def reasoning_active(self, task: str) -> bool:
        value = self.task_reasoning_tags.get(task)
        return _tags_active(value if value is not None else self.reasoning_tags)

    def repeats_of(self, task: str) -> int:
        return int(self.task_repeats.get(task) or self.repeats or 1)

    def harness_args(self, tasks: str | None = None, limit: Any = "run", offset: Any = "run") -> list[str]:
        """The lmms_eval arguments that reproduce these options (``tasks``/``limit``/``offset``
        override the run's for a partial replay)."""
        argv = ["--tasks", tasks if tasks is not None else (self.tasks or ",".join(self.leaf_tasks))]
        limit = self.limit if limit == "run" else limit
        offset = self.offset if offset == "run" else offset
        if limit is not None:
            argv += ["--limit", str(limit)]
        if offset:
            argv += ["--offset", str(int(offset))]
        repeats = self.repeats
        if repeats is None:  # no CLI value known: the tasks' own, when they agree
            values = set(self.task_repeats.values())
            repeats = values.pop() if len(values) == 1 else None
        if repeats is not None and int(repeats) > 1:
            argv += ["--repeats", str(int(repeats))]
        tags = self.reasoning_tags
        argv += [
            "--reasoning_tags",
            "none" if not _tags_active(tags) else (tags if isinstance(tags, str) else json.dumps(tags)),
        ]
        if self.include_path:
            argv += ["--include_path", str(self.include_path)]
        if self.seed is not None:
            seed = (
                self.seed
                if isinstance(self.seed, str)
                else ",".join(str(s) for s in (self.seed if isinstance(self.seed, list) else [self.seed]))
            )
            argv += ["--seed", seed]
        return argv


def run_options(results_file: Path) -> RunOptions:
    """The :class:`RunOptions` recorded in a harness results JSON (``config`` and its
    ``resolved_cli_args``, per-task ``configs``)."""
    try:
        data = json.loads(Path(results_file).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{results_file}: cannot read the run's results JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{results_file}: not a results JSON (a {type(data).__name__})")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    cli = config.get("resolved_cli_args") if isinstance(config.get("resolved_cli_args"), dict) else {}
    configs = data.get("configs") if isinstance(data.get("configs"), dict) else {}
    return RunOptions(
        source=str(results_file),
        tasks=cli.get("tasks"),
        leaf_tasks=sorted(configs) or sorted(data.get("results") or {}),
        limit=config.get("limit", cli.get("limit")),
        offset=int(config.get("offset") or cli.get("offset") or 0),
        repeats=cli.get("repeats"),
        task_repeats={t: int(c.get("repeats") or 1) for t, c in configs.items() if isinstance(c, dict)},
        reasoning_tags=cli.get("reasoning_tags", DEFAULT_REASONING_TAGS) if cli else DEFAULT_REASONING_TAGS,
        task_reasoning_tags={
            t: c.get("reasoning_tags")
            for t, c in configs.items()
            if isinstance(c, dict) and c.get("reasoning_tags") is not None
        },
        include_path=cli.get("include_path"),
        seed=cli.get("seed"),
        model=config.get("model"),
        model_args=config.get("model_args"),
    )


# -- what a samples line logged -----------------------------------------------------------------

REPEATS_KEY = "lmms_scene_repeats"


def _kept_repeats(value: Any) -> list | None:
    """The samples of Layered-VQA's ``KeepRepeats`` filter (its dict, or the ``str()`` of it
    the harness logs), else None."""
    if isinstance(value, str) and value.startswith("{'" + REPEATS_KEY + "'"):
        value = compat.literal(value)  # touch point stringified-values
        if value is None:
            return None
    if isinstance(value, dict) and REPEATS_KEY in value:
        return list(value[REPEATS_KEY])
    return None


def logged_answer(sample: dict[str, Any]) -> Any:
    """The answer a samples-file line logged, as the model returned it (first repeat).

    lmms-eval 0.7.3 keeps ``resps`` (before the task's filters) only when the filters
    changed the answer, else just ``filtered_resps``; one request per doc is unwrapped to
    ``[answer per repeat]``. A filter that keeps every repeat as a dict (Layered-VQA's
    ``KeepRepeats``) is logged as that dict's ``str()``, parsed back here."""
    kept = _kept_repeats(sample.get("resps", sample.get("filtered_resps")))
    if kept is not None:
        return kept[0] if kept else None
    resp = sample.get("resps", sample.get("filtered_resps"))
    if isinstance(resp, list) and len(resp) == 1:
        resp = resp[0]
    return resp


def logged_repeats(sample: dict[str, Any], repeats: int, reasoning_tags_active: bool = True) -> tuple[list[Any], bool]:
    """Every answer a samples-file line logged, one per repeat, and whether the line holds
    all ``repeats`` of them.

    lmms-eval 0.7.3 logs ``resps`` as the raw answers, one per repeat, only when
    ``--reasoning_tags`` is off; with the tags on (its default) it logs the filtered value
    before stripping, which for a ``take_first`` task is the first repeat alone (the only
    one scored). Layered-VQA's ``KeepRepeats`` value holds every repeat in either case."""
    for value in (sample.get("filtered_resps"), sample.get("resps")):
        kept = _kept_repeats(value)
        if kept is not None:
            return kept, len(kept) == repeats
    if repeats <= 1:
        return [logged_answer(sample)], True
    resps = sample.get("resps")
    if not reasoning_tags_active and isinstance(resps, list) and len(resps) == repeats:
        return list(resps), True
    return [logged_answer(sample)], False


def logged_answers(files: list[Path]) -> dict[tuple[str, int], Any]:
    """(task, doc_id) -> the model's answer as generated (before the task's filters; the
    first repeat)."""
    answers: dict[tuple[str, int], Any] = {}
    for f in files:
        task = task_of_samples_file(f)
        for _number, sample in iter_jsonl(f):
            answers[(task, int(sample["doc_id"]))] = logged_answer(sample)
    return answers


class SceneFromSamples(lmms):
    """Replays logged answers: ``--model_args samples=PATH`` (a run folder or samples files,
    several separated by ``|``) or ``journal=PATH`` (journal files of an ``lmms-scene
    eval`` run, ``|``-separated)."""

    def __init__(
        self, samples: str = "", journal: str = "", batch_size: int | str = 1, device: str = "cpu", **kwargs: Any
    ) -> None:
        super().__init__()
        unknown = {k: v for k, v in kwargs.items() if k not in ("device_map", "max_length")}
        if unknown:
            raise ValueError(f"scene_from_samples: unknown model_args {sorted(unknown)}")
        if bool(samples) == bool(journal):
            raise ValueError(
                "scene_from_samples: give --model_args samples=RUN_FOLDER_OR_SAMPLES_FILE or journal=JOURNAL_FILE (one of them)"
            )
        self.device = device
        self.batch_size_per_gpu = int(batch_size)
        #: (task, doc_id, idx) -> the logged answers, one per repeat, and whether all are there
        self.logged: dict[tuple[str, int, int], tuple[list[Any], bool]] = {}
        #: tasks whose samples hold one answer for several repeats (replayed for each)
        self.single_logged: set[str] = set()
        self._asked: Counter = Counter()
        if journal:
            self.files = J.journal_files([p for p in str(journal).split("|") if p])
            run = J.read(self.files)
            for (task, doc_id, idx), by_copy in run.outputs.items():
                copies = [by_copy[k] for k in sorted(by_copy)]
                self.logged[(task, doc_id, idx)] = (copies, True)
        else:
            self.files = samples_files([p for p in str(samples).split("|") if p])
            self._samples = {}
            for f in self.files:
                task = task_of_samples_file(f)
                options = run_options(results_file_of(f)) if results_file_of(f).is_file() else None
                for _number, sample in iter_jsonl(f):
                    self._samples[(task, int(sample["doc_id"]), 0)] = (sample, options)

    def _answers(self, key: tuple[str, int, int], repeats: int) -> tuple[list[Any], bool]:
        if key not in self.logged and hasattr(self, "_samples") and key in self._samples:
            sample, options = self._samples[key]
            active = options.reasoning_active(key[0]) if options is not None else True
            self.logged[key] = logged_repeats(sample, repeats, active)
        return self.logged[key]

    def _answer(self, request: Instance) -> Any:
        task, doc_id = request.task_name, int(request.doc_id)
        key = (task, doc_id, int(request.idx or 0))
        repeats = int(request.repeats or 1)
        try:
            answers, complete = self._answers(key, repeats)
        except KeyError:
            raise KeyError(
                f"scene_from_samples: the saved run has no answer for task {task!r} doc {doc_id} "
                f"(files: {', '.join(str(f) for f in self.files)}); rescore with the run's own --tasks and --limit"
            ) from None
        copy = self._asked[key]
        self._asked[key] += 1
        if copy < len(answers):
            return answers[copy]
        if not complete and len(answers) == 1:
            self.single_logged.add(task)
            return answers[0]
        raise KeyError(
            f"scene_from_samples: task {task!r} doc {doc_id}: asked for repeat {copy + 1}, the saved run logged "
            f"{len(answers)}; rescore with the run's own --repeats"
        )

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return [self._answer(r) for r in requests]

    def generate_until_multi_round(self, requests: list[Instance]) -> list[Any]:
        return [self._answer(r) for r in requests]

    def loglikelihood(self, requests: list[Instance]):
        raise NotImplementedError("scene_from_samples replays generated answers only")
