"""Model outputs made safe before anything reads them: the one sanitiser of every benchmark.

A model (ours or anyone's) can hand back text that breaks what reads it: a lone
surrogate (``"\\ud800"``, from a decoder run with ``surrogateescape`` or a JSON reply) makes
every UTF-8 encoder raise (the CLIP tokenizer, the Java PTB tokenizer of pycocoevalcap,
the harness's samples file); NUL and other control characters confuse subprocess pipes
and terminals; an output of millions of characters exceeds spaCy's ``max_length`` and
stalls the parsers. Every benchmark's row function passes the output through
:func:`clean_output` (or :func:`read_output`, which also rejects what is not text)
before any tokenizer, parser or subprocess sees it, and records in the row whether it
changed (``output_sanitised``) and how (``output_changes``).

>>> clean_output("There is no helmet.\\ud800").text
'There is no helmet.'
>>> clean_output("cup\\x00").changes
('1 control character replaced by a space',)
>>> read_output(["a", "b"]).problem
'the model output is a list of 2 items, not one text'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: An output longer than this is cut here (and the row says so). The tasks ask for at
#: most 512 new tokens (about 3,000 characters); spaCy refuses texts above 1,000,000. A
#: benchmark whose scorer parses every sentence cuts shorter (SNUS: 20,000, see
#: :data:`lmms_scene.metrics.snus.scoring.MAX_OUTPUT_CHARS`).
MAX_OUTPUT_CHARS = 100_000

# C0 controls but tab and the newlines, DEL, C1 controls (U+0085 NEL included)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_REPLACEMENT = re.compile("\ufffd")


@dataclass(frozen=True)
class Output:
    """A model output as the row functions read it: ``text`` (sanitised; None when there
    is no usable text), ``changes`` (what sanitising did, empty when nothing) and
    ``problem`` (why there is no text to score, or None)."""

    text: str | None
    changes: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def sanitised(self) -> bool:
        return bool(self.changes)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def clean_output(text: str, max_chars: int = MAX_OUTPUT_CHARS) -> Output:
    """``text`` made safe to tokenize, parse, pipe and write as UTF-8: lone surrogates and
    U+FFFD replacement characters dropped, NUL and other control characters (tab and
    newlines kept) replaced by a space, the text cut at ``max_chars`` characters.
    Thread-safe (no state)."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    changes = []
    out, n = _SURROGATE.subn("", text)
    if n:
        changes.append(f"{_plural(n, 'lone surrogate')} dropped")
    # U+FFFD stands for a character that could not be decoded (and for a lone surrogate
    # in the harness's raw record, :func:`make_writable`): never content, so a replayed
    # record scores as the original answer did
    out, n = _REPLACEMENT.subn("", out)
    if n:
        changes.append(f"{_plural(n, 'replacement character')} (U+FFFD) dropped")
    out, n = _CONTROL.subn(" ", out)
    if n:
        changes.append(f"{_plural(n, 'control character')} replaced by a space")
    if len(out) > max_chars:
        changes.append(f"cut at {max_chars} of {len(out)} characters")
        out = out[:max_chars]
    return Output(out, tuple(changes))


def sanitise_output(text: str) -> tuple[str, bool]:
    r"""A model answer made safe (:func:`clean_output`) and whether anything changed.

    >>> sanitise_output("\udcff\udcfecup\x00")
    ('cup ', True)
    """
    result = clean_output(text)
    return result.text or "", result.sanitised


def _kind(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {_plural(len(value), 'item')}"
    if isinstance(value, Mapping):
        return f"a mapping with keys {sorted(map(str, value))[:5]}"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def read_output(value: Any, max_chars: int = MAX_OUTPUT_CHARS) -> Output:
    """One model output for a row function: a string is cleaned (:func:`clean_output`);
    bytes are decoded as UTF-8 (undecodable bytes replaced, and said so); a one-item list
    holding a text is that text (said so); ``None`` is "no model output"; anything else
    (a longer list, a number, a mapping) is not one text and gets a ``problem`` naming
    what it is, for the row to record as unscored."""
    if value is None:
        return Output(None, (), "no model output for this doc")
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", errors="replace")
        cleaned = clean_output(text, max_chars)
        return Output(cleaned.text, ("bytes decoded as UTF-8", *cleaned.changes))
    if isinstance(value, str):
        return clean_output(value, max_chars)
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], (str, bytes, bytearray)):
        # one text in a list (a replayed raw record keeps the harness's list): that text
        inner = read_output(value[0], max_chars)
        return Output(inner.text, (f"unwrapped from a one-item {type(value).__name__}", *inner.changes), inner.problem)
    if isinstance(value, (list, tuple)):
        return Output(None, (), f"the model output is {_kind(value)}, not one text")
    return Output(None, (), f"the model output is {_kind(value)}, not a text")


def shown(value: Any, limit: int = 500) -> str | None:
    """What a row keeps of an output it could not score: the sanitised text, or for
    something that is not text its sanitised ``repr`` (at most ``limit`` characters), so
    the row shows what came; None for no output."""
    if value is None:
        return None
    read = read_output(value)
    if read.text is not None:
        return read.text
    return clean_output(repr(value)[:limit]).text


def clean_response(value: Any) -> Any:
    """A response as a harness filter hands it on: strings cleaned, lists and tuples
    cleaned item by item (multi-round conversations, repeats), mappings value by value;
    anything else as it is (the row function records it)."""
    if isinstance(value, str):
        return clean_output(value).text
    if isinstance(value, list):
        return [clean_response(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean_response(v) for v in value)
    if isinstance(value, Mapping):
        return {k: clean_response(v) for k, v in value.items()}
    return value


def unwritable(text: str) -> str:
    """``text`` with each lone surrogate (which no UTF-8 writer accepts) replaced by
    U+FFFD: the smallest change that lets a raw response be written as it came."""
    return _SURROGATE.sub("\ufffd", text)


def make_writable(resp: list) -> None:
    """Replace, in place, each lone surrogate in the strings of the harness's list of raw
    responses ``resp`` (and of the lists and tuples inside it: multi-round conversations)
    by U+FFFD (:func:`unwritable`). Nothing else changes."""
    for i, value in enumerate(resp):
        if isinstance(value, str):
            if _SURROGATE.search(value):
                resp[i] = unwritable(value)
        elif isinstance(value, list):
            make_writable(value)
        elif isinstance(value, tuple):
            inner = list(value)
            make_writable(inner)
            if inner != list(value):
                resp[i] = tuple(inner)


class SanitiseResponses:
    """lmms-eval filter (a task's ``filter_list``, before ``take_first``): in the harness's
    own record of the raw response (``inst.resps``, which its samples file writes) and in
    what it hands on, each lone surrogate is replaced by U+FFFD (:func:`make_writable`),
    without which lmms-eval 0.7.3 cannot write the samples file at all ("Could not save
    sample results"). Nothing else changes here: the row function sanitises what it scores
    (:func:`read_output`, which drops U+FFFD too, so a replay scores as the original) and
    its row says what sanitising changed (``output_sanitised``, ``output_changes``); had
    this filter cleaned the text, every row would say nothing was changed."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"SanitiseResponses takes no arguments, got {sorted(kwargs)}")

    def apply(self, resps, docs):
        out = []
        for resp in resps:
            if isinstance(resp, list):
                make_writable(resp)  # the harness's own list: its samples file writes it
                out.append(list(resp))
            elif isinstance(resp, tuple):
                inner = list(resp)
                make_writable(inner)
                out.append(inner)
            else:
                out.append(unwritable(resp) if isinstance(resp, str) else resp)
        return out
