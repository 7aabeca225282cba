"""Reading the line-based files lmms-scene meets (samples files, metadata, pairs), with
errors that name the file and line.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
>>> _ = path.write_text('{"id": 1}\\n\\n{"id": 2}\\n')
>>> [(n, row["id"]) for n, row in iter_jsonl(path)]
[(1, 1), (3, 2)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def iter_jsonl(
    path: str | Path, *, objects: bool = True, error: type[Exception] = ValueError
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSON-lines file.

    A line that is not JSON, or (with ``objects``) not a JSON object, raises ``error``
    naming the file and the line; a file that is not UTF-8 or cannot be read raises it
    naming the file."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"{path}: cannot be read ({exc.strerror})") from None
    with handle:
        number = 0
        try:
            for number, line in enumerate(handle, 1):  # noqa: B007 - kept for the error below
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise error(f"{path} line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
                if objects and not isinstance(value, dict):
                    raise error(f"{path} line {number}: expected a JSON object, got {type(value).__name__}")
                yield number, value
        except UnicodeDecodeError as exc:
            raise error(f"{path} line {number + 1}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8") from None


def read_jsonl(path: str | Path, *, objects: bool = True, error: type[Exception] = ValueError) -> list[Any]:
    """The values of a JSON-lines file (see :func:`iter_jsonl`)."""
    return [value for _, value in iter_jsonl(path, objects=objects, error=error)]
