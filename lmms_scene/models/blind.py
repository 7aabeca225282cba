"""``scene_blind``: a baseline that never looks at the images.

It answers from text priors only, so its score shows how much of a benchmark can be
solved without looking. Each benchmark supplies its prior in the registry
(:data:`lmms_scene.benchmarks.BENCHMARKS`, ``blind_prior``: ``blind_answer(doc, prompt)
-> str``); the model finds a task's benchmark from what the task declares
(``metadata.benchmark``; see :func:`lmms_scene.benchmarks.benchmark_of_task`), so a task
a user built (``lmms-scene build cooco ... --out D``) is recognised too.
"""

from __future__ import annotations

from lmms_scene import benchmarks
from lmms_scene.models._base import RequestInfo, SceneModel, Turn


def benchmark_of(task: str) -> str:
    """The benchmark ``task`` belongs to (``ValueError`` naming the task if none)."""
    try:
        return benchmarks.benchmark_of_task(task).name
    except ValueError as err:
        raise ValueError(f"scene_blind: {err}") from None


def prior_for(task: str):
    bench = benchmarks.get(benchmark_of(task))
    module = bench.blind_prior.partition(":")[0]
    try:
        return benchmarks.resolve(bench.blind_prior)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise NotImplementedError(f"scene_blind: no text prior for benchmark {bench.name!r} yet") from None


class SceneBlind(SceneModel):
    looks_at_images = False

    def respond(self, info: RequestInfo, turns: list[Turn]) -> str:
        if info.doc is None:
            raise RuntimeError(f"scene_blind: task {info.task!r} doc {info.doc_id} not found in the task's data")
        return prior_for(info.task)(info.doc, turns[-1].text)


class SceneBlindChat(SceneBlind):
    is_simple = False
