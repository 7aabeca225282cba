"""The one place that owns caching: loaded models, embeddings and corpus-level values.

* :func:`cached`: process-wide objects that live for the whole run (loaded checkpoints);
  created once even when lmms-eval calls ``process_results`` from several threads.
* :func:`memo`: bounded, least-recently-used values in a named namespace (text and image
  embeddings, blind-prior answers, corpus-level metrics), so memory stays flat on long runs.
* :func:`load_pretrained`: the one way lmms-scene loads a Hugging Face model
  (``from_pretrained``, then ``to(device)``, then ``eval()``).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_values: dict[Hashable, object] = {}
_locks: dict[Hashable, threading.Lock] = {}
_closers: dict[Hashable, Callable[[Any], object]] = {}
_guard = threading.Lock()

#: default size of a :func:`memo` namespace (entries)
MEMO_SIZE = 50_000
_memos: dict[str, LRU] = {}


def cached(key: Hashable, loader: Callable[[], T], close: Callable[[T], object] | None = None) -> T:
    """Return the object cached under ``key``, calling ``loader()`` once to create it.

    Thread-safe: concurrent callers with the same key wait for the one loader call;
    callers with different keys do not block each other. A loader that raises caches
    nothing, so the next call tries again. ``close(value)`` releases what the object
    holds (a subprocess, such as the METEOR JVM) when :func:`clear` drops it.

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
            if close is not None:
                _closers[key] = close
        return _values[key]  # type: ignore[return-value]


class LRU:
    """A thread-safe bounded mapping; the least recently used entry goes first.

    >>> lru = LRU(2); lru.put("a", 1); lru.put("b", 2); lru.put("c", 3); lru.keys()
    ['b', 'c']
    """

    def __init__(self, max_entries: int = MEMO_SIZE):
        if max_entries < 1:
            raise ValueError(f"max_entries: expected >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()
        self._computing: dict[Hashable, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._data)

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value under ``key``, computing it once (concurrent callers wait)."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            lock = self._computing.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._data:
                    return self._data[key]
            value = compute()
            self.put(key, value)
            with self._lock:
                self._computing.pop(key, None)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def memo_namespace(namespace: str, max_entries: int = MEMO_SIZE) -> LRU:
    """The bounded cache called ``namespace`` (created on first use)."""
    with _guard:
        lru = _memos.get(namespace)
        if lru is None:
            lru = _memos[namespace] = LRU(max_entries)
        return lru


def memo(namespace: str, key: Hashable, compute: Callable[[], T], max_entries: int = MEMO_SIZE) -> T:
    """``compute()`` memoised under ``key`` in the bounded namespace ``namespace``."""
    return memo_namespace(namespace, max_entries).get_or_compute(key, compute)


def clear(keep: Callable[[Hashable], bool] | None = None) -> None:
    """Drop every cached object and memo (tests use this to check loading behaviour),
    closing each dropped object that was cached with a ``close``. ``keep(key)``: the
    cached objects to keep loaded (the memos are dropped all the same)."""
    with _guard:
        dropped = [k for k in _values if keep is None or not keep(k)]
        closing = [(k, _values[k], _closers.pop(k)) for k in dropped if k in _closers]
        for k in dropped:
            del _values[k]
            _locks.pop(k, None)
        for lru in _memos.values():
            lru.clear()
    for key, value, close in closing:
        try:
            close(value)
        except Exception as err:  # a dead subprocess is already what closing wanted
            warnings.warn(f"lmms-scene: closing the cached {key!r} failed: {type(err).__name__}: {err}", stacklevel=2)


def _reset_locks_after_fork() -> None:
    """Fresh locks in a forked child (used by the parallel CESG build): a lock another
    thread held at the fork would never be released there."""
    global _guard
    _guard = threading.Lock()
    for key in list(_locks):
        _locks[key] = threading.Lock()
    for lru in _memos.values():
        lru._lock = threading.RLock()


def loaded_keys() -> list[Hashable]:
    """The keys that currently hold a loaded object."""
    return list(_values)


def torch_device(requested: str | None = None) -> str:
    """The device to compute on: ``requested`` if given, else CUDA when present, else CPU."""
    if requested:
        return requested
    import torch  # deferred: torch is heavy to import

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_pretrained(cls: Any, name: str, device: str | None = None, **kwargs: Any) -> Any:
    """``cls.from_pretrained(name, **kwargs)`` moved to ``device`` (unless it was placed
    by ``device_map``) and put in eval mode: the one way lmms-scene loads a model."""
    model = cls.from_pretrained(name, **kwargs)
    if device is not None and kwargs.get("device_map") is None:
        model = model.to(device)
    return model.eval()
