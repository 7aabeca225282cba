"""A test-only patch: lmms-eval's task index memoised per folder (touch point
``task-index-memo`` in lmms_scene/compat.py, which checks the harness's shape). The tests'
fork server (tests/forkserver.py) installs it so its forks skip indexing lmms-eval's ~3,300
YAML files (~8 s on a 2-core machine); users' runs never do, so it lives here, not in the
library."""

from __future__ import annotations

import copy
import functools
import inspect
import os
from typing import Any

from lmms_scene import compat

_INDEX_MEMO_MARK = "__lmms_scene_index_memo__"
#: folders lmms-eval 0.7.3's ``_get_task_and_group`` does not descend into
_INDEX_IGNORED_DIRS = ("__pycache__", ".ipynb_checkpoints")


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


def memoize_task_index() -> bool:
    """Make ``TaskManager._get_task_and_group(self, task_dir)`` index each task folder once
    per process while its YAML files are unchanged (:func:`yaml_signature`), and hand every
    caller its own copy. Returns False, changing nothing, when the harness is not the tested
    shape (touch point ``task-index-memo``)."""
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
                memo[key] = original(self, task_dir)
            return copy.deepcopy(memo[key])

        return _get_task_and_group

    return compat.patch_once(TaskManager, "_get_task_and_group", _INDEX_MEMO_MARK, wrap)
