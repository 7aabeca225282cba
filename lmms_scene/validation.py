"""Argument checks at the door of the public functions.

A bare ``str`` where a sequence of texts is expected is the classic silent bug (it is
iterated character by character): :func:`texts` wraps it when one text is meant, or
rejects it, naming the argument. Every error names the argument and the value.

>>> texts("A photo depicts a mug", "references")
['A photo depicts a mug']
>>> texts(["a", "b"], "candidates")
['a', 'b']
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def texts(value: Any, name: str, *, wrap_str: bool = True, allow_empty: bool = True) -> list[str]:
    """``value`` as a list of strings. A lone string is one text (``wrap_str``) or an
    error; anything else must be an iterable of strings."""
    if isinstance(value, str):
        if not wrap_str:
            raise TypeError(f"{name}: expected a sequence of strings, got a single string {_show(value)}")
        return [value]
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{name}: expected a sequence of strings, got {type(value).__name__}: {_show(value)}")
    out = list(value)
    for i, item in enumerate(out):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}]: expected a string, got {type(item).__name__}: {_show(item)}")
    if not allow_empty and not out:
        raise ValueError(f"{name}: expected at least one string, got none")
    return out


def reference_lists(value: Any, name: str, n: int | None = None) -> list[list[str]]:
    """References per item: a list with one entry per item, each a string (one
    reference) or a sequence of strings. A lone string for the whole batch is rejected
    unless ``n == 1`` (then it is that item's one reference)."""
    if isinstance(value, str):
        if n == 1:
            return [[value]]
        raise TypeError(f"{name}: expected one reference list per item, got a single string {_show(value)}")
    if not isinstance(value, Iterable):
        raise TypeError(f"{name}: expected a sequence of reference lists, got {type(value).__name__}: {_show(value)}")
    out = [texts(item, f"{name}[{i}]") for i, item in enumerate(value)]
    if n is not None and len(out) != n:
        raise ValueError(f"{name}: {len(out)} reference lists for {n} items")
    for i, refs in enumerate(out):
        if not refs:
            raise ValueError(f"{name}[{i}]: every item needs at least one reference text")
    return out


def field_names(value: Any, name: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    """Field names as a tuple (a lone name is one field)."""
    fields = tuple(texts(value, name))
    if not fields and not allow_empty:
        raise ValueError(f"{name}: expected at least one field name")
    return fields


def non_negative_int(value: Any, name: str, minimum: int = 0) -> int:
    """An integer >= ``minimum`` (bools and non-integral floats rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name}: expected an integer, got {type(value).__name__}: {_show(value)}")
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    return int(value)


def probability(value: Any, name: str, *, open_interval: bool = False) -> float:
    """A float in [0, 1] (or (0, 1) with ``open_interval``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number in [0, 1], got {type(value).__name__}: {_show(value)}")
    v = float(value)
    bad = not math.isfinite(v) or (v <= 0 or v >= 1 if open_interval else v < 0 or v > 1)
    if bad:
        raise ValueError(f"{name}: expected a number in {'(0, 1)' if open_interval else '[0, 1]'}, got {value!r}")
    return v


def same_length(**named: Sequence) -> int:
    """The common length of several batches; ``ValueError`` naming each length otherwise."""
    lengths = {k: len(v) for k, v in named.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"batch lengths differ: {lengths}")
    return next(iter(lengths.values()), 0)
