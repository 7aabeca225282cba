"""``scene_from_samples``: answers every request with the answer a saved run logged.

``lmms-scene rescore RUN`` runs the harness with this model over a saved run's samples
files (``--log_samples`` output), so every metric is recomputed by the tasks' own
``process_results`` and aggregations, on the same data, without the model that
generated the answers. lmms-eval's own ``from_log`` model reads an older log format
(not 0.7.3's samples JSONL), hence this one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from lmms_scene.files import iter_jsonl


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
        raise FileNotFoundError(f"no *_samples_*.jsonl under {', '.join(map(str, items))} (was the run made with --log_samples?)")
    return [found[t] for t in sorted(found)]


def logged_answer(sample: dict[str, Any]) -> Any:
    """The answer a samples-file line logged, as the model returned it (first repeat).

    lmms-eval 0.7.3 keeps ``resps`` (before the task's filters) only when the filters
    changed the answer, else just ``filtered_resps``; one request per doc is unwrapped to
    ``[answer per repeat]``. A filter that keeps every repeat as a dict (Layered-VQA's
    ``KeepRepeats``) is logged as that dict's ``str()``, parsed back here."""
    import ast

    resp = sample.get("resps", sample.get("filtered_resps"))
    if isinstance(resp, str) and resp.startswith("{'lmms_scene_repeats'"):
        try:
            resp = ast.literal_eval(resp)
        except (ValueError, SyntaxError):
            return resp
    if isinstance(resp, dict) and "lmms_scene_repeats" in resp:
        repeats = resp["lmms_scene_repeats"]
        return repeats[0] if repeats else None
    if isinstance(resp, list) and len(resp) == 1:
        resp = resp[0]
    return resp


def logged_answers(files: list[Path]) -> dict[tuple[str, int], Any]:
    """(task, doc_id) -> the model's answer as generated (before the task's filters)."""
    answers: dict[tuple[str, int], Any] = {}
    for f in files:
        task = task_of_samples_file(f)
        for _number, sample in iter_jsonl(f):
            answers[(task, int(sample["doc_id"]))] = logged_answer(sample)
    return answers


class SceneFromSamples(lmms):
    """Replays logged answers; ``--model_args samples=PATH`` (a run folder or samples files,
    several separated by ``|``)."""

    def __init__(self, samples: str = "", batch_size: int | str = 1, device: str = "cpu", **kwargs: Any) -> None:
        super().__init__()
        unknown = {k: v for k, v in kwargs.items() if k not in ("device_map", "max_length")}
        if unknown:
            raise ValueError(f"scene_from_samples: unknown model_args {sorted(unknown)}")
        if not samples:
            raise ValueError("scene_from_samples: give --model_args samples=RUN_FOLDER_OR_SAMPLES_FILE")
        self.device = device
        self.batch_size_per_gpu = int(batch_size)
        self.files = samples_files([p for p in str(samples).split("|") if p])
        self.answers = logged_answers(self.files)

    def _answer(self, request: Instance) -> Any:
        task, doc_id = request.args[-2], request.args[-3]
        key = (task, int(doc_id))
        if key not in self.answers:
            raise KeyError(
                f"scene_from_samples: the saved run has no answer for task {task!r} doc {doc_id} "
                f"(files: {', '.join(str(f) for f in self.files)}); rescore with the run's own --tasks and --limit"
            )
        return self.answers[key]

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return [self._answer(r) for r in requests]

    def generate_until_multi_round(self, requests: list[Instance]) -> list[Any]:
        return [self._answer(r) for r in requests]

    def loglikelihood(self, requests: list[Instance]):
        raise NotImplementedError("scene_from_samples replays generated answers only")
