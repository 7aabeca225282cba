"""CESG's optional LLM judges through :mod:`lmms_scene.judges` (lmms-eval's clients, our
strict verdict parser): the synonym verifier Q_v and the extra-matching judge Q_e.

Each is a callable returning True / False, or None when the judge failed or its reply was
ambiguous; CESG counts None as no match and lists it in ``judge_failures`` (never scored).
Each carries ``name`` and ``provenance`` for the results.
"""

from __future__ import annotations

from typing import Any

from lmms_scene import judges
from lmms_scene.judges import JudgeSpec

VERIFY_PROMPT = (
    "Two elements of scene descriptions, each naming something that is missing from a scene:\n"
    "A: {a}\nB: {b}\n"
    "Do A and B mean the same missing thing? Reply with exactly one word: yes or no."
)
EXTRA_PROMPT = (
    "Reference description of what is missing from a scene (safety view):\n{reference}\n"
    "Claim: '{element}' is missing from the scene.\n"
    "Is the claim true of this scene although the reference does not state it? Reply with exactly one word: yes or no."
)


class _Judge:
    def __init__(self, spec: Any, template: str, client: Any = None):
        if not isinstance(spec, JudgeSpec):
            raise TypeError(f"spec: expected a lmms_scene.judges.JudgeSpec, got {type(spec).__name__}: {spec!r}")
        self.spec, self.template, self.client = spec, template, client
        self.name = f"{spec.name} ({spec.model})"
        self.replies: list[dict[str, Any]] = []

    @property
    def provenance(self) -> dict[str, Any]:
        return {**self.spec.describe(), "parser": "lmms_scene.judges.parse_verdict", "prompt": self.template}

    def _ask(self, prompt: str) -> bool | None:
        reply = judges.ask(self.spec, prompt, client=self.client)
        self.replies.append(reply.to_dict())
        return reply.verdict if reply.ok else None


class SynonymVerifier(_Judge):
    """Q_v(x, y): do two verbalised elements mean the same?"""

    def __init__(self, spec: Any, client: Any = None, template: str = VERIFY_PROMPT):
        super().__init__(spec, template, client)

    def __call__(self, a: str, b: str) -> bool | None:
        return self._ask(self.template.format(a=a, b=b))


class ExtraJudge(_Judge):
    """Q_e(x): is a predicted absence missing from the reference nevertheless correct?
    Text-only judges see the reference caption; an image-capable judge would see the image."""

    def __init__(self, spec: Any, reference: str, client: Any = None, template: str = EXTRA_PROMPT):
        super().__init__(spec, template, client)
        self.reference = reference

    def __call__(self, element: str) -> bool | None:
        return self._ask(self.template.format(reference=self.reference, element=element))


class ExtraJudges:
    """Q_e for a whole run: ``for_reference(text)`` gives the :class:`ExtraJudge` of one
    row (each row's judge sees that row's reference). What ``LMMS_SCENE_CESG``'s
    ``extra=SPEC`` builds for the harness task."""

    def __init__(self, spec: Any, client: Any = None, template: str = EXTRA_PROMPT):
        if not isinstance(spec, JudgeSpec):
            raise TypeError(f"spec: expected a lmms_scene.judges.JudgeSpec, got {type(spec).__name__}: {spec!r}")
        self.spec, self.client, self.template = spec, client, template
        self.name = f"{spec.name} ({spec.model})"

    @property
    def provenance(self) -> dict[str, Any]:
        return {**self.spec.describe(), "parser": "lmms_scene.judges.parse_verdict", "prompt": self.template}

    def for_reference(self, reference: str) -> ExtraJudge:
        return ExtraJudge(self.spec, reference, client=self.client, template=self.template)
