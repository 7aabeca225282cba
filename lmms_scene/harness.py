"""Small adapters for known quirks of the pinned harness (lmms-eval 0.7.3).

Each one says which quirk it handles, so it can be dropped when the harness fixes it.
"""

from __future__ import annotations

import ast
from typing import Any


def round_outputs(results: Any) -> list[str]:
    """The per-round answers of one multi-round document, as a list of strings.

    ``process_results`` gets them in three shapes in lmms-eval 0.7.3: a list (chat
    models, and lmms-scene's own models), a one-element list holding that list, or,
    from the simple ``qwen2_vl``/``qwen2_5_vl``/``llava_onevision`` classes, the
    ``str()`` of a tuple of strings (the harness stringifies their tuple). The last is
    parsed back with :func:`ast.literal_eval`, which evaluates literals only.

    >>> round_outputs(["('a', 'b')"])
    ['a', 'b']
    >>> round_outputs([["a", "b"]])
    ['a', 'b']
    """
    if isinstance(results, (list, tuple)) and len(results) == 1 and isinstance(results[0], (list, tuple)):
        results = results[0]
    if isinstance(results, str):
        results = [results]
    outputs = list(results)
    if len(outputs) == 1 and isinstance(outputs[0], str) and outputs[0].startswith("("):
        try:
            parsed = ast.literal_eval(outputs[0])
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, tuple) and all(isinstance(x, str) for x in parsed):
            return list(parsed)
    return ["" if o is None else str(o) for o in outputs]
