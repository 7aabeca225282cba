"""``scene_blind``: a baseline that never looks at the images.

It answers from text priors only, so its score shows how much of a benchmark can be
solved without looking. Each benchmark supplies its prior as
``lmms_scene.baselines.<benchmark>.blind_answer(doc, prompt) -> str``; the model
picks the benchmark from the task name (``cooco_noise`` -> ``cooco``).
"""

from __future__ import annotations

import importlib

from lmms_scene.models._base import RequestInfo, SceneModel, Turn

# Longest names first, so "layered_vqa_sample" is not read as another benchmark.
BENCHMARKS = ("layered_vqa", "cooco", "snus")


def benchmark_of(task: str) -> str:
    for name in BENCHMARKS:
        if task == name or task.startswith(name + "_"):
            return name
    raise ValueError(f"scene_blind: task {task!r} is not an lmms-scene benchmark ({', '.join(BENCHMARKS)})")


def prior_for(task: str):
    bench = benchmark_of(task)
    try:
        module = importlib.import_module(f"lmms_scene.baselines.{bench}")
    except ModuleNotFoundError as err:
        if err.name != f"lmms_scene.baselines.{bench}":
            raise
        raise NotImplementedError(f"scene_blind: no text prior for benchmark {bench!r} yet") from None
    return module.blind_answer


class SceneBlind(SceneModel):
    looks_at_images = False

    def respond(self, info: RequestInfo, turns: list[Turn]) -> str:
        if info.doc is None:
            raise RuntimeError(f"scene_blind: task {info.task!r} doc {info.doc_id} not found in the task's data")
        return prior_for(info.task)(info.doc, turns[-1].text)


class SceneBlindChat(SceneBlind):
    is_simple = False
