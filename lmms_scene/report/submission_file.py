"""Reading a submission file as the leaderboard must: a regular file only, never
blocking (no FIFO, device or link followed), at most :data:`MAX_FILE_BYTES`, numbers finite
and of at most :data:`MAX_DIGITS` digits, no duplicate keys, nested at most :data:`MAX_DEPTH`
deep, valid UTF-8. :func:`load_file` gives the parsed JSON or why not; checking what it says
is :mod:`lmms_scene.report.submission`."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

#: what the leaderboard reads of a file: at most this many bytes, nested this deep, with
#: numbers of at most this many digits (a 401-digit integer or ``1e400`` is refused)
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_DIGITS = 40


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


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number with {len(text.lstrip('-'))} digits (at most {MAX_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    digits = sum(ch.isdigit() for ch in text)
    if digits > MAX_DIGITS:
        raise ValueError(f"a number with {digits} digits (at most {MAX_DIGITS})")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:80]!r} appears twice in one object")
        out[key] = value
    return out


def _walk(data: Any) -> str | None:
    """Why the parsed document cannot be read (None: it can): nested deeper than
    :data:`MAX_DEPTH`, or a string with a lone surrogate or a NUL."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            stack.extend((k, depth + 1) for k in node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
        elif isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return f"a string with a lone surrogate ({node[:40]!r})"
    return None


def load_file(path: str | Path) -> tuple[Any, list[str]]:
    """A submission file parsed with every limit the leaderboard needs (see :func:`_read_bytes`;
    numbers finite and of at most :data:`MAX_DIGITS` digits, no duplicate keys, nested at
    most :data:`MAX_DEPTH` deep, valid UTF-8 without lone surrogates), or None and why not."""
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
        data = json.loads(
            text, parse_constant=_no_constants, parse_int=_parse_int, parse_float=_parse_float, object_pairs_hook=_pairs
        )
    except json.JSONDecodeError as exc:
        return None, [f"not JSON (line {exc.lineno}: {exc.msg})"]
    except RecursionError:
        return None, [f"not JSON this leaderboard reads (nested deeper than {MAX_DEPTH} levels)"]
    except ValueError as exc:
        return None, [f"not JSON ({exc})"]
    why = _walk(data)
    if why:
        return None, [f"not JSON this leaderboard reads ({why})"]
    return data, []
