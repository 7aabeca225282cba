"""Shared machinery of lmms-scene's own harness models (``echo`` and ``scene_blind``).

Both come in a simple and a chat variant. The two variants only differ in how a
request describes its turns, so each is turned into the same list of :class:`Turn`
and one ``respond`` method answers it. Multi-round requests follow the harness's
protocol (round 0 from ``doc_to_text``/``doc_to_messages``; round k from the same
function called with ``round_idx``/``previous_output``/``previous_round_info``) and
return one list of answers per document, never a tuple. Every answer is sanitised
before the harness sees it (:func:`_sanitised`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed as dist

from lmms_scene import compat
from lmms_scene.compat import GenerationRequest
from lmms_scene.metrics.outputs import clean_output

lmms = compat.model_base()
#: a harness request (``lmms_eval.api.instance.Instance``; touch point ``model-base``)
Instance = Any

# A task whose rounds never end would hang an evaluation: past this many rounds
# ``echo``/``scene_blind`` fail the request with an error naming the task and document,
# and ``scene_replay`` logs it and keeps the rounds so far (:func:`converse`).
MAX_ROUNDS = 64


class StopConversation(Exception):
    """Raised by a round's ``answer`` to end the conversation, keeping the rounds before."""


def converse(first: Any, answer: Any, next_turn: Any = None, on_limit: Any = None) -> tuple[list, list]:
    """The one conversation loop of lmms-scene's models (``echo``, ``scene_blind``,
    ``scene_replay``), following the harness's multi-round protocol.

    ``answer(turns)`` answers the last of the turns so far; ``next_turn(round_idx,
    previous_outputs, round_info) -> (turn, round_info)`` gives the next turn, None when
    the task ends the conversation (no ``next_turn``: one round). Past :data:`MAX_ROUNDS`
    rounds ``on_limit()`` is called (it may raise) and the loop stops; an ``answer`` that
    raises :class:`StopConversation` stops it too. Returns the turns and the outputs."""
    turns, outputs = [first], []
    try:
        outputs.append(answer(turns))
        round_info = None
        while next_turn is not None:
            if len(outputs) >= MAX_ROUNDS:
                on_limit()
                break
            turn, round_info = next_turn(len(outputs), list(outputs), round_info)
            if turn is None:
                break
            turns.append(turn)
            outputs.append(answer(turns))
    except StopConversation:
        pass
    return turns, outputs


@dataclass
class Turn:
    """What the model received in one round."""

    text: str
    image_sizes: list[tuple[int, int]] = field(default_factory=list)
    other_media: int = 0

    @property
    def n_images(self) -> int:
        return len(self.image_sizes)


@dataclass
class RequestInfo:
    task: str
    split: str
    doc_id: int
    doc: dict[str, Any] | None


def _image_size(visual: Any) -> tuple[int, int] | None:
    size = getattr(visual, "size", None)
    if isinstance(size, tuple) and len(size) == 2:
        return (int(size[0]), int(size[1]))
    return None


def _turn_from_visuals(text: str, visuals: list | None) -> Turn:
    sizes, other = [], 0
    for visual in visuals or []:
        size = _image_size(visual)
        if size is None:
            other += 1
        else:
            sizes.append(size)
    return Turn(text=text, image_sizes=sizes, other_media=other)


def _turn_from_messages(messages: list[dict]) -> Turn:
    """The last user message of a chat request, as a Turn."""
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise ValueError(f"chat request has no user message: {messages!r}")
    content = users[-1].get("content")
    if isinstance(content, str):
        return Turn(text=content)
    texts, visuals = [], []
    for part in content:
        if part.get("type") == "text":
            texts.append(part.get("text", ""))
        else:
            media = part.get("url", part.get(part.get("type"), None))
            visuals.append(media)
    return _turn_from_visuals("\n".join(texts), visuals)


def _sanitised(answer: Any) -> Any:
    """What our models hand the harness: text sanitised
    (:func:`lmms_scene.metrics.outputs.clean_output`), so the harness can write it to its
    samples file and every scorer can read it; anything else as it is (the task's row
    function records it unscored)."""
    return clean_output(answer).text if isinstance(answer, str) else answer


class SceneModel(lmms):
    """Base of the text-driven test and baseline models; subclasses implement ``respond``."""

    is_simple = True
    #: whether ``doc_to_visual`` is called at all (the blind baseline never calls it)
    looks_at_images = True

    def __init__(
        self, record: str | None = None, batch_size: int | str = 1, device: str = "cpu", **kwargs: Any
    ) -> None:
        super().__init__()
        unknown = {k: v for k, v in kwargs.items() if k not in ("device_map", "max_length")}
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown model_args {sorted(unknown)}")
        # The harness gathers per-rank counts as tensors on `lm.device`; these models
        # compute nothing, so the CPU (gloo) is right even on GPU machines.
        self.device = device
        self.batch_size_per_gpu = int(batch_size)
        self._record_path = Path(record) if record else None
        self._record_lock = threading.Lock()
        # Under `accelerate launch` the harness shards documents by rank, so a model
        # must report the process group it runs in.

        if dist.is_available() and dist.is_initialized():
            compat.set_process_group(self, dist.get_rank(), dist.get_world_size())
        if self._record_path and self.world_size > 1:
            self._record_path = self._record_path.with_name(f"{self._record_path.name}.rank{self.rank}")

    # --- what subclasses implement -------------------------------------------------
    def respond(self, info: RequestInfo, turns: list[Turn]) -> str:  # pragma: no cover
        raise NotImplementedError

    # --- the harness's interface -------------------------------------------------------
    def loglikelihood(self, requests: list[Instance]):
        raise NotImplementedError(
            f"{type(self).__name__} answers generation tasks only; lmms-scene has no loglikelihood task"
        )

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return [self._answer(r, multi_round=False) for r in requests]

    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str]]:
        return [self._answer(r, multi_round=True) for r in requests]

    # --- internals -----------------------------------------------------------------
    def _doc(self, task: str, split: str, doc_id: int) -> dict | None:
        try:
            return self.task_dict[task][split][doc_id]
        except (KeyError, IndexError, TypeError):
            return None

    def _answer(self, request: Instance, multi_round: bool):
        req = GenerationRequest.of(request, chat=not self.is_simple, multi_round=multi_round)
        if self.is_simple:
            return self._answer_simple(req, multi_round)
        return self._answer_chat(req, multi_round)

    def _answer_simple(self, req: GenerationRequest, multi_round: bool):
        info = RequestInfo(req.task, req.split, req.doc_id, self._doc(req.task, req.split, req.doc_id))
        visuals = req.doc_to_visual(info.doc) if (self.looks_at_images and info.doc is not None) else []

        def next_round(round_idx, previous, round_info):
            visuals, text, terminal, _prev, round_info = req.doc_to_text(
                info.doc, previous_output=previous, round_idx=round_idx, previous_round_info=round_info
            )
            turn = None if terminal else _turn_from_visuals(text, visuals if self.looks_at_images else [])
            return turn, round_info

        return self._converse(info, _turn_from_visuals(req.context, visuals), next_round if multi_round else None)

    def _answer_chat(self, req: GenerationRequest, multi_round: bool):
        info = RequestInfo(req.task, req.split, req.doc_id, self._doc(req.task, req.split, req.doc_id))

        def next_round(round_idx, previous, round_info):
            messages, terminal, _prev, round_info = req.doc_to_messages(
                info.doc, round_idx=round_idx, previous_output=previous, previous_round_info=round_info
            )
            return (None if terminal else _turn_from_messages(messages)), round_info

        return self._converse(
            info, _turn_from_messages(req.doc_to_messages(info.doc)), next_round if multi_round else None
        )

    def _converse(self, info: RequestInfo, first: Turn, next_round):
        """Answer ``first``; with ``next_round`` (multi-round), keep asking it for the next
        turn (None when the task says the conversation is over) and answering."""

        def too_many() -> None:
            raise RuntimeError(f"task {info.task!r} doc {info.doc_id}: no terminal signal after {MAX_ROUNDS} rounds")

        turns, outputs = converse(first, lambda turns: _sanitised(self.respond(info, turns)), next_round, too_many)
        self._record(info, turns, outputs)
        return outputs if next_round is not None else outputs[0]

    def _record(self, info: RequestInfo, turns: list[Turn], outputs: list[str]) -> None:
        if self._record_path is None:
            return
        line = {
            "task": info.task,
            "split": info.split,
            "doc_id": info.doc_id,
            "variant": "simple" if self.is_simple else "chat",
            "turns": [asdict(t) | {"n_images": t.n_images} for t in turns],
            "outputs": outputs,
        }
        with self._record_lock, self._record_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
