"""A test-only patch: lmms-eval's task index memoised per folder (touch point
``task-index-memo`` in lmms_scene/compat.py, which checks the harness's shape). The tests'
fork server (tests/forkserver.py) installs it so its forks skip indexing lmms-eval's ~3,300
YAML files (~8 s on a 2-core machine); users' runs never do, so it lives here, not in the
library. With a folder (``memoize_task_index(folder)``, or ``LMMS_SCENE_TEST_INDEX_CACHE``,
which tests/conftest.py gives the fork server), the index is also kept there, one pickle per
(folder, YAML signature), so the fork server and the xdist workers index lmms-eval's folder
once per pytest run between them."""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from lmms_scene import compat

_INDEX_MEMO_MARK = "__lmms_scene_index_memo__"
#: folders lmms-eval 0.7.3's ``_get_task_and_group`` does not descend into
_INDEX_IGNORED_DIRS = ("__pycache__", ".ipynb_checkpoints")
#: the folder the index is also kept in (set by :func:`memoize_task_index`)
CACHE_ENV = "LMMS_SCENE_TEST_INDEX_CACHE"
_DISK: dict[str, str | None] = {"folder": None}


def _disk_path(key: tuple) -> Path | None:
    folder = _DISK["folder"]
    return None if folder is None else Path(folder) / (hashlib.sha256(repr(key).encode()).hexdigest() + ".pickle")


def _read(key: tuple) -> Any:
    path = _disk_path(key)
    if path is None or not path.is_file():
        return None
    with open(path, "rb") as f:  # written by _write below, in this pytest run's own folder
        found_key, index = pickle.load(f)
    return index if found_key == key else None


def _write(key: tuple, index: Any) -> None:
    path = _disk_path(key)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        pickle.dump((key, index), f)
    os.replace(tmp, path)  # whole or absent for a reader in another process


def yaml_signature(task_dir: str) -> tuple[tuple[str, int, int], ...]:
    """(relative path, mtime in ns, size) of every ``.yaml`` file the harness's task index
    reads under ``task_dir``, in path order: what :func:`memoize_task_index` keys on."""
    found = []
    for root, dirs, files in os.walk(task_dir):
        dirs[:] = [d for d in dirs if d not in _INDEX_IGNORED_DIRS]
        for name in files:
            if name.endswith(".yaml"):
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                found.append((os.path.relpath(path, task_dir), st.st_mtime_ns, st.st_size))
    return tuple(sorted(found))


def memoize_task_index(folder: str | None = None) -> bool:
    """Make ``TaskManager._get_task_and_group(self, task_dir)`` index each task folder once
    per process while its YAML files are unchanged (:func:`yaml_signature`), and hand every
    caller its own copy; with ``folder`` (else ``LMMS_SCENE_TEST_INDEX_CACHE``), once for all
    the processes that share that folder. Returns False, changing nothing, when the harness
    is not the tested shape (touch point ``task-index-memo``)."""
    folder = folder or os.environ.get(CACHE_ENV)
    if folder:
        _DISK["folder"] = folder
    TaskManager = compat.task_manager()
    method = getattr(TaskManager, "_get_task_and_group", None)
    if method is None or list(inspect.signature(compat.unpatched(method)).parameters) != ["self", "task_dir"]:
        return False
    memo: dict[tuple, Any] = {}

    def wrap(original):
        @functools.wraps(original)
        def _get_task_and_group(self, task_dir):
            key = (os.path.realpath(task_dir), yaml_signature(task_dir))
            if key not in memo:
                found = _read(key)
                if found is None:
                    found = original(self, task_dir)
                    _write(key, found)
                memo[key] = found
            return copy.deepcopy(memo[key])

        return _get_task_and_group

    return compat.patch_once(TaskManager, "_get_task_and_group", _INDEX_MEMO_MARK, wrap)
