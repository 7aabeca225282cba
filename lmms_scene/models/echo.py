"""``echo``: a deterministic test model that records what it received.

Use it to check what a task sends to a model (how many images per turn, their
sizes, the text of each turn) without loading any weights::

    lmms-scene eval --model echo --model_args record=/tmp/echo.jsonl --tasks cooco_sample

Model args: ``record`` (a JSONL file: one line per document with every turn and
answer), ``answer`` (a fixed answer; by default the model answers with a description
of what it received, e.g. ``"1 image 448x448; 212 chars"``).
"""

from __future__ import annotations

from typing import Any

from lmms_scene.models._base import RequestInfo, SceneModel, Turn


class Echo(SceneModel):
    def __init__(self, answer: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fixed_answer = answer

    def respond(self, info: RequestInfo, turns: list[Turn]) -> str:
        if self.fixed_answer is not None:
            return self.fixed_answer
        turn = turns[-1]
        sizes = ", ".join(f"{w}x{h}" for w, h in turn.image_sizes)
        images = f"{turn.n_images} image{'s' if turn.n_images != 1 else ''}"
        return f"{images}{' ' + sizes if sizes else ''}; {len(turn.text)} chars"


class EchoChat(Echo):
    is_simple = False
