"""``scene_replay``: multi-round tasks for any lmms-eval model, one request per turn.

lmms-eval 0.7.3 runs ``generate_until_multi_round`` only on a few model classes. This
wrapper gives it to every other one: it loads the model named by ``inner`` and, for each
document, asks it one plain ``generate_until`` request per round, the round's prompt
being the task's own (for Layered-VQA: the whole transcript so far, earlier replies
included, and every image shown so far). All turns' outputs come back as one list, so
every turn reaches ``process_results`` and the samples file.

    lmms_eval --model scene_replay \\
        --model_args inner=idefics2,pretrained=HuggingFaceM4/idefics2-8b \\
        --tasks layered_vqa --batch_size 1

``inner`` is the harness's model name; ``inner_chat=True`` picks its chat class (the
simple one by default, as ``--force_simple`` would); every other argument goes to the
inner model. A turn that fails (the model raises, or returns no list) ends that
document's conversation: the turns before are kept, the failure is logged with the
task and document, and the scored row says the conversation stopped early.
"""

from __future__ import annotations

import copy
from typing import Any

from loguru import logger

from lmms_scene import compat
from lmms_scene.compat import GenerationRequest
from lmms_scene.models._base import MAX_ROUNDS, Instance, StopConversation, converse, lmms

__all__ = ["MAX_ROUNDS", "SceneReplay"]  # rounds asked at most per document: the models' one limit


class SceneReplay(lmms):
    is_simple = True

    def __init__(self, inner: str | None = None, inner_chat: bool = False, **kwargs: Any) -> None:
        super().__init__()
        if not inner or not isinstance(inner, str):
            raise ValueError(
                "scene_replay: model_args must name the wrapped model, e.g. inner=qwen2_5_vl,pretrained=..."
            )
        if inner == "scene_replay":
            raise ValueError("scene_replay: inner=scene_replay would wrap itself")
        cls = compat.model_class(inner, force_simple=not _truthy(inner_chat))
        args = {k: v for k, v in kwargs.items() if v is not None}
        self.inner_name = inner
        self._inner = cls(**args)
        # the harness fills lm.task_dict in place; the inner model reads the same dict
        self._inner.task_dict = self.task_dict
        compat.set_process_group(self, getattr(self._inner, "rank", 0), getattr(self._inner, "world_size", 1))
        self.device = getattr(self._inner, "device", "cpu")
        self.batch_size_per_gpu = 1

    def __getattr__(self, name: str) -> Any:
        # anything the harness asks that the wrapper does not define (tokenizer, config, ...)
        inner = self.__dict__.get("_inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    # -- plain requests go straight through -------------------------------------------
    def loglikelihood(self, requests: list[Instance]):
        return self._inner.loglikelihood(requests)

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return self._inner.generate_until(requests)

    # -- multi-round: one inner request per round ---------------------------------------
    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str]]:
        return [self._converse(r) for r in requests]

    def _ask(
        self, text: str, visuals: list, gen_kwargs: dict, doc_id: int, task: str, split: str, metadata: dict
    ) -> str:
        if self._inner.is_simple:
            request = GenerationRequest(
                text, copy.deepcopy(gen_kwargs), doc_id, task, split, doc_to_visual=lambda _doc, v=list(visuals): v
            )
        else:

            def doc_to_messages(_doc, v=list(visuals), t=text):  # noqa: B006 (binds this row's values)
                content = [{"type": "image", "url": img} for img in v] + [{"type": "text", "text": t}]
                return [{"role": "user", "content": content}]

            request = GenerationRequest(
                text, copy.deepcopy(gen_kwargs), doc_id, task, split, chat=True, doc_to_messages=doc_to_messages
            )
        out = self._inner.generate_until([compat.make_request("generate_until", request.as_args(), metadata)])
        if not isinstance(out, (list, tuple)) or len(out) != 1:
            raise RuntimeError(f"{self.inner_name}.generate_until returned {out!r:.200} for one request")
        return "" if out[0] is None else str(out[0])

    def _converse(self, request: Instance) -> list[str]:
        req = GenerationRequest.of(request, chat=False, multi_round=True)
        task, doc_id = req.task, req.doc_id
        metadata = dict(request.metadata or {"task": task, "doc_id": doc_id, "repeats": 1})
        doc = self.task_dict[task][req.split][doc_id]

        def answer(turns: list) -> str:
            text, visuals = turns[-1]
            try:
                return self._ask(text, visuals or [], req.gen_kwargs, doc_id, task, req.split, metadata)
            except Exception as exc:  # the turns before are kept; the row records the early stop
                logger.error(
                    f"scene_replay: task {task!r} doc {doc_id} round {len(turns) - 1}: {self.inner_name} failed: {type(exc).__name__}: {exc}"
                )
                raise StopConversation from exc

        def next_turn(round_idx: int, previous: list, info: Any):
            visuals, text, terminal, _prev, info = req.doc_to_text(
                doc, previous_output=previous, round_idx=round_idx, previous_round_info=info
            )
            return (None if terminal else (text, visuals)), info

        def too_many() -> None:
            logger.error(f"scene_replay: task {task!r} doc {doc_id}: no terminal signal after {MAX_ROUNDS} rounds")

        _turns, outputs = converse((req.context, req.doc_to_visual(doc)), answer, next_turn, too_many)
        return outputs


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
