"""Reading the line-based and JSON files lmms-scene meets (samples files, metadata, pairs,
journals, submissions), with errors that name the file and line, and writing our own
files atomically.

Every JSON value we read goes through :func:`loads`: a key repeated in one object (JSON
lets the last one win silently), an integer of more than :data:`MAX_INT_DIGITS` digits, a
number literal longer than :data:`MAX_NUMBER_CHARS` characters or one that overflows a
float (``1e400``, a 400-digit score) and nesting deeper than :data:`MAX_DEPTH` levels are
errors naming the file, the line and the key or number; ``NaN`` / ``Infinity`` too where
the caller asks for finite numbers (``allow_nan=False``).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
>>> _ = path.write_text('{"id": 1}\\n\\n{"id": 2}\\n')
>>> [(n, row["id"]) for n, row in iter_jsonl(path)]
[(1, 1), (3, 2)]
>>> loads('{"a": 1, "a": 2}', where="m.json")
Traceback (most recent call last):
ValueError: m.json line 1: key 'a' appears twice in one object
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the most digits an integer we read may have (ids, counts, seeds fit; 10**20 is no score)
MAX_INT_DIGITS = 20
#: the longest number literal we read (a float's shortest repr has at most 24 characters)
MAX_NUMBER_CHARS = 64
#: the deepest nesting of lists and objects we read (ours are a few levels deep)
MAX_DEPTH = 64


@dataclass(frozen=True)
class Limits:
    """What :func:`parse` accepts of outside JSON. The defaults are ours (samples files,
    metadata, journals); a reader with stricter needs passes its own (the leaderboard's
    submissions: :data:`lmms_scene.report.submission_file.LIMITS`)."""

    #: the deepest nesting of lists and objects
    max_depth: int = MAX_DEPTH
    #: the most digits an integer may have
    max_int_digits: int = MAX_INT_DIGITS
    #: the longest non-integer number literal
    max_number_chars: int = MAX_NUMBER_CHARS
    #: whether a string may hold a lone surrogate (``"\\ud800"``: not writable as UTF-8)
    lone_surrogates: bool = True


DEFAULT_LIMITS = Limits()


class Refused(ValueError):
    """What :func:`parse` refuses: a repeated key, an absurd or non-finite number
    (``limit`` False: JSON we will not read), or a reader's limit (``limit`` True: nesting, a lone
    surrogate). ``key`` locates it in the text."""

    def __init__(self, message: str, key: str | None = None, *, limit: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.limit = limit


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Refused(f"key {key[:80]!r} appears twice in one object", key)
        out[key] = value
    return out


def _int_hook(limits: Limits) -> Callable[[str], int]:
    def parse_int(text: str) -> int:
        digits = len(text.lstrip("-"))
        if digits > limits.max_int_digits:
            raise Refused(f"the integer {text[:12]}... has {digits} digits (at most {limits.max_int_digits})", text)
        return int(text)

    return parse_int


def _float_hook(limits: Limits) -> Callable[[str], float]:
    def parse_float(text: str) -> float:
        if len(text) > limits.max_number_chars:
            raise Refused(
                f"the number {text[:12]}... is {len(text)} characters long (at most {limits.max_number_chars})", text
            )
        value = float(text)
        if not math.isfinite(value):
            raise Refused(f"the number {text} is out of range ({text} is not a finite number)", text)
        return value

    return parse_float


def _no_constants(name: str) -> float:
    raise Refused(f"{name} is not a finite number", name)


_int = _int_hook(DEFAULT_LIMITS)
_float = _float_hook(DEFAULT_LIMITS)

#: the hooks of :func:`loads` for a caller that runs ``json.loads`` itself (repeated keys,
#: absurd numbers refused as ``ValueError``; without the line)
STRICT_HOOKS: dict[str, Any] = {"object_pairs_hook": _unique, "parse_int": _int, "parse_float": _float}


def _check_tree(value: Any, limits: Limits) -> None:
    """Raise :class:`Refused` (``limit`` True) when ``value`` nests deeper than the limits
    allow or (where they say so) holds a string with a lone surrogate."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limits.max_depth:
                raise Refused(f"nested deeper than {limits.max_depth} levels", limit=True)
            if isinstance(item, dict):
                if not limits.lone_surrogates:
                    stack.extend((k, depth + 1) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and not limits.lone_surrogates:
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused(f"a string with a lone surrogate ({item[:40]!r})", limit=True) from None


def parse(text: str, *, limits: Limits = DEFAULT_LIMITS, allow_nan: bool = True) -> Any:
    """``text`` parsed as JSON within ``limits``: the one JSON reader for outside text.
    Raises :class:`Refused` (the reason alone, no file or line) or ``json.JSONDecodeError``;
    :func:`loads` adds the file and line."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique,
            parse_int=_int if limits.max_int_digits == MAX_INT_DIGITS else _int_hook(limits),
            parse_float=_float if limits.max_number_chars == MAX_NUMBER_CHARS else _float_hook(limits),
            parse_constant=(lambda name: float(name)) if allow_nan else _no_constants,
        )
    except RecursionError:
        raise Refused(f"nested deeper than {limits.max_depth} levels", limit=True) from None
    if isinstance(value, (list, dict)) or not limits.lone_surrogates:
        _check_tree(value, limits)
    return value


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def _first_duplicate(text: str) -> tuple[str, int] | None:
    """The first key (in text order) repeated in its object, and its line: a walk over the
    text's strings and brackets (only when the parser found a repeat; it does not say where)."""
    keys: list[set | None] = []
    last = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            keys.append(set() if token == "{" else None)
        elif token in "}]":
            if keys:
                keys.pop()
        elif token == ":":
            if keys and keys[-1] is not None and last is not None:
                key = json.loads(last.group())
                if key in keys[-1]:
                    return key, text.count("\n", 0, last.start()) + 1
                keys[-1].add(key)
        last = match if token.startswith('"') else None
    return None


def _line_of(text: str, exc: Refused) -> int | None:
    """The line of what ``exc`` refused: a repeated key, or a number literal."""
    if "twice" in str(exc):
        found = _first_duplicate(text)
        return found[1] if found else None
    if exc.key:
        at = text.find(exc.key)
        return text.count("\n", 0, at) + 1 if at >= 0 else None
    return None


def loads(
    text: str,
    *,
    where: str,
    line: int | None = None,
    allow_nan: bool = True,
    error: type[Exception] = ValueError,
    limits: Limits = DEFAULT_LIMITS,
) -> Any:
    """``text`` parsed by :func:`parse` within ``limits``. An error names ``where`` (the
    file) and the line: ``line`` when the text is one line of a file, else the line inside
    ``text``."""
    try:
        return parse(text, limits=limits, allow_nan=allow_nan)
    except Refused as exc:
        at = line if (line is not None or exc.limit) else _line_of(text, exc)
        raise error(f"{where}{f' line {at}' if at else ''}: {exc}") from None
    except json.JSONDecodeError as exc:
        if line is not None:  # one line of a JSON-lines file
            raise error(f"{where} line {line}: not JSON ({exc.msg} at column {exc.colno})") from None
        raise error(f"{where} line {exc.lineno} column {exc.colno}: not JSON ({exc.msg})") from None


def read_json(path: str | Path, *, allow_nan: bool = True, error: type[Exception] = ValueError) -> Any:
    """A JSON file parsed by :func:`loads` (UTF-8, a BOM allowed); errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise FileNotFoundError(f"{path}: cannot be read ({exc.strerror})") from None
    return loads(text, where=str(path), allow_nan=allow_nan, error=error)


def iter_jsonl(
    path: str | Path, *, objects: bool = True, error: type[Exception] = ValueError, allow_nan: bool = True
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSON-lines file.

    A line that is not JSON (or that :func:`loads` refuses), or (with ``objects``) not a
    JSON object, raises ``error`` naming the file and the line; a file that is not UTF-8
    or cannot be read raises it naming the file."""
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
                value = loads(line, where=str(path), line=number, allow_nan=allow_nan, error=error)
                if objects and not isinstance(value, dict):
                    raise error(f"{path} line {number}: expected a JSON object, got {type(value).__name__}")
                yield number, value
        except UnicodeDecodeError as exc:
            raise error(
                f"{path} line {number + 1}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8"
            ) from None


def read_jsonl(
    path: str | Path, *, objects: bool = True, error: type[Exception] = ValueError, allow_nan: bool = True
) -> list[Any]:
    """The values of a JSON-lines file (see :func:`iter_jsonl`)."""
    return [value for _, value in iter_jsonl(path, objects=objects, error=error, allow_nan=allow_nan)]


def write_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` all or nothing: a temporary file in the same folder,
    flushed and fsynced, then renamed over ``path``. A failed write (a full disk) leaves
    ``path`` as it was and no temporary file, and raises ``OSError`` naming ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding=encoding) as f:
            # mkstemp makes the file private (0600): keep the mode the file had, else the usual 0644
            os.fchmod(f.fileno(), path.stat().st_mode & 0o777 if path.exists() else 0o644)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OSError(exc.errno, f"{path}: could not be written ({exc.strerror or exc})") from None
    return path
