"""Layered-VQA's wiring to the harness's multi-round protocol: a document's turns, the
rounds (:func:`simple_round`, :func:`chat_messages`), every repeat kept
(:class:`KeepRepeats`, :func:`conversations`).

Every round replays every earlier turn, model replies included, because no model in
lmms-eval 0.7.3 keeps a conversation history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.data.layered_vqa.delivery import Turn, deliver
from lmms_scene.data.layered_vqa.schema import item_where
from lmms_scene.metrics.outputs import clean_response, make_writable

# -- the harness's multi-round protocol ---------------------------------------------------

#: hard cap on rounds for any schedule (chat vllm has none of its own)
MAX_ROUNDS = 32
#: the most layers a scene may have: recap-v delivers it in one turn per layer plus one
MAX_LAYERS = MAX_ROUNDS - 1


def turns_of(doc: Mapping[str, Any]) -> list[Turn]:
    """The turns of a task document (a row with its ``schedule`` and ``repeat_seed``)."""
    schedule = doc.get("schedule")
    if schedule is None:
        raise ValueError(f"{item_where(doc)}: the document has no 'schedule' (process_docs adds it)")
    return deliver(doc, schedule, int(doc.get("seed", 0) or 0), check=False)


class KeepRepeats:
    """lmms-eval filter (the tasks' ``filter_list``) keeping every sample of a request.

    The harness's default filter (``take_first``) keeps only the first of the ``--repeats``
    samples; this one hands all of them on, marked, so :func:`conversations` tells them
    from the rounds of one conversation. Every reply is sanitised on the way
    (:func:`lmms_scene.metrics.outputs.clean_response`), and lone surrogates in the
    harness's raw record are replaced so that its samples file can be written
    (:class:`lmms_scene.metrics.outputs.SanitiseResponses` does that for SNUS and
    COOCO, whose row functions then sanitise and record what they changed)."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"KeepRepeats takes no arguments, got {sorted(kwargs)}")

    def apply(self, resps, docs):
        # sanitised for scoring; in the harness's raw record only lone surrogates are
        # replaced (U+FFFD), else lmms-eval cannot write its samples file at all

        out = []
        for r in resps:
            if isinstance(r, list):
                make_writable(r)
            out.append({REPEATS_KEY: clean_response(list(r))})
        return out


REPEATS_KEY = "lmms_scene_repeats"


def conversations(results: Any) -> list[Any]:
    """The conversations in a multi-round document's ``results``, one per repeat. With
    :class:`KeepRepeats` they come as ``[{"lmms_scene_repeats": [c0, c1, ...]}]``;
    without it one entry per request, each a list of per-round outputs or, from the
    simple qwen classes, the string of a tuple. A flat list of plain strings is one
    conversation (one output per round)."""
    if (
        isinstance(results, (list, tuple))
        and len(results) == 1
        and isinstance(results[0], Mapping)
        and REPEATS_KEY in results[0]
    ):
        found = list(results[0][REPEATS_KEY])
        if not found:
            return [[]]
        return [[c] if isinstance(c, str) else c for c in found]
    if isinstance(results, (list, tuple)) and len(results) > 1:
        if all(
            isinstance(r, (list, tuple)) or (isinstance(r, str) and r.startswith("(") and r.endswith(")"))
            for r in results
        ):
            return [[r] if isinstance(r, str) else r for r in results]
    return [results]


def transcript(turns: Sequence[Turn], outputs: Sequence[str]) -> str:
    """The conversation so far as one prompt for models without a chat history: every
    earlier turn with the assistant's reply, then the new turn. One turn is its text alone."""
    if len(turns) == 1:
        return turns[0].text
    lines = []
    for k, turn in enumerate(turns):
        lines.append(f"User: {turn.text}")
        if k < len(turns) - 1:
            reply = outputs[k] if k < len(outputs) else ""
            lines.append(f"Assistant: {reply}")
    lines.append("Assistant:")
    return "\n".join(lines)


def simple_round(doc: Mapping[str, Any], previous_output: Sequence[str] | None = None, round_idx: int | None = None):
    """``doc_to_text`` for simple models. Round 0 (no ``round_idx``): the first turn's
    text. Round k: ``(visuals, text, terminal, previous_output, round_info)`` where the
    visuals are every image shown so far and the text the whole transcript; terminal
    once every turn has been answered (always, so no model loops for ever)."""
    turns = turns_of(doc)
    if round_idx is None:
        return turns[0].text
    previous = [str(o) for o in (previous_output or [])]
    info = {"turns": len(turns), "round": round_idx}
    if round_idx >= len(turns) or round_idx >= MAX_ROUNDS:
        return None, None, True, previous, info
    upto = turns[: round_idx + 1]
    visuals = [img for t in upto for img in t.images]
    return visuals, transcript(upto, previous), False, previous, info


def first_visuals(doc: Mapping[str, Any]) -> list:
    return turns_of(doc)[0].images


def _user(turn: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "image", "url": img} for img in turn.images]
    content.append({"type": "text", "text": turn.text})
    return {"role": "user", "content": content}


def chat_messages(doc: Mapping[str, Any], previous_output: Sequence[str] | None = None, round_idx: int | None = None):
    """``doc_to_messages`` for chat models: the whole conversation so far (user turns
    with their images, assistant turns with the earlier replies). Round 0: the messages;
    round k: ``(messages, terminal, previous_output, round_info)``, terminal after the
    last turn."""
    turns = turns_of(doc)
    if round_idx is None:
        return [_user(turns[0])]
    previous = [str(o) for o in (previous_output or [])]
    info = {"turns": len(turns), "round": round_idx}
    if round_idx >= len(turns) or round_idx >= MAX_ROUNDS:
        return None, True, previous, info
    messages = []
    for k, turn in enumerate(turns[: round_idx + 1]):
        messages.append(_user(turn))
        if k < round_idx:
            messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": previous[k] if k < len(previous) else ""}]}
            )
    return messages, False, previous, info
