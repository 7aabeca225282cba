"""Comparing a recomputed result with a pinned one (tests/test_*_numbers.py)."""

from __future__ import annotations

import math


def compare(
    expected, got, path: str, problems: list[str], skip: frozenset[str] = frozenset(), tol: float = 1e-6
) -> None:
    """Append to ``problems`` every place where ``got`` differs from ``expected``: floats
    to ``tol``, everything else exactly; dict keys in ``skip`` are not compared."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            problems.append(f"{path}: expected a dict, got {got!r:.80}")
            return
        for key, value in expected.items():
            if key in skip:
                continue
            if key not in got:
                problems.append(f"{path}/{key}: missing")
            else:
                compare(value, got[key], f"{path}/{key}", problems, skip, tol)
    elif isinstance(expected, list) and isinstance(got, (list, tuple)) and len(expected) == len(got):
        for i, (e, g) in enumerate(zip(expected, got)):
            compare(e, g, f"{path}[{i}]", problems, skip, tol)
    elif isinstance(expected, float) and not isinstance(expected, bool):
        if not (isinstance(got, (int, float)) and math.isclose(expected, got, rel_tol=0, abs_tol=tol)):
            problems.append(f"{path}: expected {expected!r}, got {got!r}")
    elif expected != got:
        problems.append(f"{path}: expected {expected!r}, got {got!r:.200}")
