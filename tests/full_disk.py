"""``python tests/full_disk.py ROOT BYTES ARGS...`` (or ``python -m full_disk ...`` with tests/ on
PYTHONPATH, which the tests' fork server runs in a fork): ``lmms-scene ARGS`` with a full disk
under ROOT (issue 32), without mounting one.

Every file opened for writing under ROOT, except the generation journal's folder, shares a
budget of BYTES bytes: a write that does not fit writes what fits and then fails with
``OSError(ENOSPC)``, as a write to a full filesystem does; every later write fails at once.
The journal is left out because on a real disk it fills first, chunk by chunk, during
generation, and the harness's results come after it (the issue's 40 KB tmpfs held the
journal's 20 outputs and cut the results JSON). ``builtins.open`` and ``io.open`` (which
``pathlib.Path.open`` calls) are wrapped; nothing else of the process changes.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
LEFT = [int(sys.argv[2])]
_open = io.open


class FullDisk:
    def __init__(self, handle) -> None:
        self._handle = handle

    def write(self, data):
        size = len(data.encode("utf-8") if isinstance(data, str) else data)
        if size <= LEFT[0]:
            LEFT[0] -= size
            return self._handle.write(data)
        fits = data[: LEFT[0]]  # characters for a text file: at most LEFT bytes of ASCII, fewer of UTF-8 (close enough)
        if fits:
            self._handle.write(fits)
            self._handle.flush()
        LEFT[0] = 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)

    def __iter__(self):
        return iter(self._handle)

    def __getattr__(self, name):
        return getattr(self._handle, name)


def full_open(file, mode="r", *args, **kwargs):
    handle = _open(file, mode, *args, **kwargs)
    if isinstance(file, (str, os.PathLike)) and any(m in mode for m in "wax+"):
        path = Path(file).resolve()
        if ROOT in path.parents and "lmms_scene_journal" not in path.parts:
            return FullDisk(handle)
    return handle


builtins.open = io.open = full_open

if __name__ == "__main__":
    from lmms_scene.cli import main

    sys.exit(main(sys.argv[3:]))
