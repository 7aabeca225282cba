"""Reading a submission file as the leaderboard must: a regular file only, never
blocking (no FIFO, device or link followed), at most :data:`MAX_FILE_BYTES`, valid UTF-8,
then parsed by :func:`lmms_scene.files.parse` (the one reader of outside JSON) with the
leaderboard's own :data:`LIMITS`: integers of at most :data:`MAX_DIGITS` digits, finite
numbers, no duplicate keys, nested at most :data:`MAX_DEPTH` deep, no lone surrogates.
:func:`load_file` gives the parsed JSON or why not; checking what it says is
:mod:`lmms_scene.report.submission`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from lmms_scene import files

#: what the leaderboard reads of a file: at most this many bytes, nested this deep, with
#: integers of at most this many digits (a 401-digit integer or ``1e400`` is refused)
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_DIGITS = 40
#: the limits :func:`lmms_scene.files.parse` reads a submission with
LIMITS = files.Limits(max_depth=MAX_DEPTH, max_int_digits=MAX_DIGITS, lone_surrogates=False)


def _read_bytes(path: Path) -> bytes:
    """A regular file's bytes, read without following a link and never blocking: a symbolic
    link, a FIFO, a device or a folder is refused by its name and never opened; more than
    :data:`MAX_FILE_BYTES` is refused. Raises ``ValueError`` saying which."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise ValueError("a symbolic link (only regular files inside the folder are read; links are never followed)")
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "a special file"
        )
        raise ValueError(f"{kind}, not a regular file (never opened)")
    if st.st_size > MAX_FILE_BYTES:
        raise ValueError(f"{st.st_size} bytes, more than the {MAX_FILE_BYTES} a submission may have")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        again = os.fstat(fd)
        if not stat.S_ISREG(again.st_mode) or (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
            raise ValueError("changed while it was being read (not the regular file it was)")
        chunks, total = [], 0
        while total <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > MAX_FILE_BYTES:
            raise ValueError(f"more than the {MAX_FILE_BYTES} bytes a submission may have")
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_file(path: str | Path) -> tuple[Any, list[str]]:
    """A submission file read by :func:`_read_bytes` and parsed within :data:`LIMITS`, or
    None and why not."""
    try:
        raw = _read_bytes(Path(path))
    except ValueError as exc:
        return None, [f"refused: {exc}"]
    except OSError as exc:
        return None, [f"cannot be read ({exc.strerror or exc})"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [f"not UTF-8 (byte {exc.start})"]
    try:
        data = files.parse(text, limits=LIMITS, allow_nan=False)
    except json.JSONDecodeError as exc:
        return None, [f"not JSON (line {exc.lineno}: {exc.msg})"]
    except files.Refused as exc:
        if exc.limit:
            return None, [f"not JSON this leaderboard reads ({exc})"]
        return None, [f"not JSON ({exc})"]
    return data, []
