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


# -- wrapping a harness function once ---------------------------------------------------


def patch_once(owner: Any, name: str, mark: str, wrap: Any) -> bool:
    """Replace ``owner.name`` by ``wrap(original)`` unless it is already our wrapper
    (marked with the attribute ``mark``). Returns False, changing nothing, when the
    harness has no such attribute; True when our wrapper is in place."""
    original = getattr(owner, name, None)
    if original is None:
        return False
    if getattr(original, mark, False):
        return True
    wrapper = wrap(original)
    setattr(wrapper, mark, True)
    setattr(owner, name, wrapper)
    return True


# -- the printed results table --------------------------------------------------------

_TABLE_MARK = "__lmms_scene_numbers_only__"


def numbers_only(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of a harness results dict whose per-task metrics are numbers (or None):
    structured values (lmms-scene's breakdowns) are left out of the printed table; they
    stay in the results JSON under their own key (``lmms-scene show`` prints them).

    >>> numbers_only({"results": {"t": {"a,none": 0.5, "b,none": {"x": 1}, "alias": "t"}}})["results"]
    {'t': {'a,none': 0.5, 'alias': 't'}}
    """
    out = dict(result_dict)
    for section in ("results", "groups"):
        if isinstance(out.get(section), dict):
            out[section] = {
                task: {k: v for k, v in metrics.items() if not isinstance(v, (dict, list, tuple))}
                if isinstance(metrics, dict) else metrics
                for task, metrics in out[section].items()
            }
    return out


def install_table_filter() -> bool:
    """Make lmms-eval 0.7.3's ``make_table`` print numbers only (see :func:`numbers_only`).

    0.7.3 formats a dict-valued metric into one cell several kilobytes wide. The wrapper
    changes only what is printed, never the results JSON. Returns False (and changes
    nothing) when the harness has no ``lmms_eval.utils.make_table``."""
    import sys

    try:
        import lmms_eval.utils as harness_utils
    except Exception:  # pragma: no cover - the harness itself is broken
        return False
    original = getattr(harness_utils, "make_table", None)

    def wrap(make_table_fn):
        def make_table(result_dict, column: str = "results", *args, **kwargs):
            return make_table_fn(numbers_only(result_dict), column, *args, **kwargs)

        return make_table

    if not patch_once(harness_utils, "make_table", _TABLE_MARK, wrap):
        return False
    # modules that imported the name before the hook ran hold the original
    for name in ("lmms_eval.evaluator", "lmms_eval.__main__"):
        module = sys.modules.get(name)
        if module is not None and original is not None and getattr(module, "make_table", None) is original:
            module.make_table = harness_utils.make_table
    return True


# -- batch pre-scoring after generation -------------------------------------------------

_PRESCORE_MARK = "__lmms_scene_prescore__"


def task_pairs(task: Any, filter_key: str = "none") -> list[tuple[Any, Any]]:
    """``(doc, answer)`` for every request of a harness task after its filters ran, as
    ``process_results`` will see them (lmms-eval 0.7.3: a request's ``doc_id`` indexes
    ``task.eval_docs``; a ``generate_until`` answer is stripped)."""
    docs = task.eval_docs
    pairs = []
    for inst in task.instances:
        answer = inst.filtered_resps.get(filter_key)
        if isinstance(answer, str):
            answer = answer.strip()
        pairs.append((docs[inst.doc_id], answer))
    return pairs


def install_prescore_hook() -> bool:
    """After a task's filters run (all answers of this process are in), call its
    benchmark's ``prescore`` (registry) with the task's ``(doc, answer)`` pairs, so the
    scores ``process_results`` reads can be computed in batches. Best effort: when
    anything differs from the tested harness, or pre-scoring fails, ``process_results``
    scores row by row and gets the same numbers. Returns whether the hook is installed."""
    import warnings

    try:
        from lmms_eval.api.task import ConfigurableTask
    except Exception:  # pragma: no cover - the harness itself is broken
        return False
    def wrap(original):
        def apply_filters(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            try:
                _prescore(self)
            except Exception as err:
                task = getattr(getattr(self, "config", None), "task", "?")
                warnings.warn(f"lmms-scene: batch pre-scoring of {task} failed ({err!r}); scoring row by row", stacklevel=2)
            return out

        return apply_filters

    return patch_once(ConfigurableTask, "apply_filters", _PRESCORE_MARK, wrap)


def _prescore(task: Any) -> None:
    from lmms_scene import benchmarks

    config = getattr(task, "config", None)
    metadata = getattr(config, "metadata", None)
    name = benchmarks.declared_benchmark({"metadata": metadata}) if isinstance(metadata, dict) else None
    if name is None or name not in benchmarks.names():
        return
    spec = benchmarks.get(name).prescore
    if spec and task.instances:
        from loguru import logger  # the harness's logger

        done = benchmarks.resolve(spec)(task_pairs(task))
        logger.info(f"lmms-scene: pre-scored {done} of {len(task.instances)} answers of {config.task} in batches")


# -- aggregations that never lose a run ------------------------------------------------


def guarded_aggregation(fn):
    """Wrap a task's aggregation so a failure is reported, not raised: lmms-eval 0.7.3
    writes neither results nor samples when an aggregation raises, so hours of
    generations would be lost. A guarded aggregation logs the error and returns
    ``{"error": ...}`` (dict-valued keys) or None (numeric keys, printed as N/A)."""
    import functools

    @functools.wraps(fn)
    def aggregate(items):
        try:
            return fn(items)
        except Exception as err:
            from loguru import logger

            message = f"{type(err).__name__}: {err}"
            logger.error(f"lmms-scene: aggregation {fn.__name__} failed over {len(items)} rows: {message}")
            return {"error": message, "n_rows": len(items)} if getattr(fn, "returns_dict", False) else None

    return aggregate


def returns_dict(fn):
    """Mark an aggregation whose value is a dict (see :func:`guarded_aggregation`)."""
    fn.returns_dict = True
    return fn
