"""The one place that owns model loading and caching.

Every model lmms-scene loads (CLIP for the metrics, sentence encoders, VLM checkpoints
for analysis) goes through :func:`cached`, so a checkpoint is loaded once per process
even when lmms-eval calls ``process_results`` from several threads at once.
"""

from __future__ import annotations

import threading
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")

_values: dict[Hashable, object] = {}
_locks: dict[Hashable, threading.Lock] = {}
_guard = threading.Lock()


def cached(key: Hashable, loader: Callable[[], T]) -> T:
    """Return the object cached under ``key``, calling ``loader()`` once to create it.

    Thread-safe: concurrent callers with the same key wait for the one loader call;
    callers with different keys do not block each other. A loader that raises caches
    nothing, so the next call tries again.

    >>> cached(("doc", "example"), lambda: [1, 2])
    [1, 2]
    """
    try:
        return _values[key]  # type: ignore[return-value]
    except KeyError:
        pass
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _values:
            _values[key] = loader()
        return _values[key]  # type: ignore[return-value]


def clear() -> None:
    """Drop every cached object (tests use this to check loading behaviour)."""
    with _guard:
        _values.clear()
        _locks.clear()


def loaded_keys() -> list[Hashable]:
    """The keys that currently hold a loaded object."""
    return list(_values)


def torch_device(requested: str | None = None) -> str:
    """The device to compute on: ``requested`` if given, else CUDA when present, else CPU."""
    if requested:
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
