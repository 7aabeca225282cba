"""Small adapters for known quirks of the pinned harness (lmms-eval 0.7.3).

Each one says which quirk it handles, so it can be dropped when the harness fixes it.
What they touch of the harness goes through :mod:`lmms_scene.compat` (the one door);
``round_outputs``, ``patch_once`` and ``task_pairs`` live there and are re-exported here
for the task folders.
"""

from __future__ import annotations

import functools
from typing import Any

from lmms_scene import benchmarks, compat, registration
from lmms_scene.compat import patch_once, round_outputs, task_pairs

__all__ = [
    "guarded_aggregation",
    "install",
    "install_prescore_hook",
    "install_table_filter",
    "numbers_only",
    "patch_once",
    "returns_dict",
    "round_outputs",
    "task_pairs",
]


def install() -> bool:
    """Route 3 of :mod:`lmms_scene.registration`: index our task folder in every
    ``TaskManager`` (:func:`lmms_scene.registration.install_task_path_hook`) and, when that
    worked, the numbers-only printed table and the prescore hook below. Returns whether
    our tasks are indexed (False: pass ``--include_path``)."""
    if not registration.install_task_path_hook():
        return False
    install_table_filter()
    install_prescore_hook()
    return True


# -- the printed results table --------------------------------------------------------


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
                if isinstance(metrics, dict)
                else metrics
                for task, metrics in out[section].items()
            }
    return out


def install_table_filter() -> bool:
    """Make lmms-eval 0.7.3's ``make_table`` print numbers only (see :func:`numbers_only`).

    0.7.3 formats a dict-valued metric into one cell several kilobytes wide. The wrapper
    changes only what is printed, never the results JSON. Returns False (and changes
    nothing) when the harness has no ``make_table`` (touch point ``printed-table``)."""
    return compat.install_table_filter(numbers_only, not_computed_notes)


def not_computed_notes(result_dict: dict[str, Any], column: str = "results") -> str:
    """The lines printed under the harness's table for every metric it shows as ``N/A``
    (a value of None): which task and metrics, and why, from the reason our report dicts
    record (the first text beginning "not computed" in the task's structured values, e.g.
    COOCO's ``scorer.clip_metrics``); an empty string when every metric has a value.

    >>> not_computed_notes({"results": {"t": {"a,none": None, "b,none": 0.5, "r,none": {"why": "not computed: no CLIP"}}}})
    '\\nN/A t: a: not computed: no CLIP\\n'
    """
    if column != "results" or not isinstance(result_dict.get("results"), dict):
        return ""
    lines = []
    for task, metrics in result_dict["results"].items():
        if not isinstance(metrics, dict):
            continue
        missing = sorted({k.split(",")[0] for k, v in metrics.items() if v is None and "_stderr" not in k})
        if not missing:
            continue
        reason = next((r for v in metrics.values() if isinstance(v, (dict, list)) for r in _reasons(v)), None)
        lines.append(f"N/A {task}: {', '.join(missing)}: {reason or 'not computed (lmms-scene show RESULTS says why)'}")
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def _reasons(value: Any, depth: int = 0):
    """Texts beginning "not computed" inside ``value`` (dicts and lists, 6 levels at most)."""
    if depth > 6:
        return
    if isinstance(value, str):
        if value.startswith("not computed"):
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _reasons(v, depth + 1)
    elif isinstance(value, list):
        for v in value[:50]:
            yield from _reasons(v, depth + 1)


# -- batch pre-scoring after generation -------------------------------------------------


def install_prescore_hook() -> bool:
    """After a task's filters run (all answers of this process are in), call its
    benchmark's ``prescore`` (registry) with the task's ``(doc, answer)`` pairs, so the
    scores ``process_results`` reads can be computed in batches. Best effort: when
    anything differs from the tested harness, or pre-scoring fails, ``process_results``
    scores row by row and gets the same numbers (touch point ``apply-filters``). Returns
    whether the hook is installed."""
    return compat.install_after_filters(_prescore)


def _prescore(task: Any) -> None:
    config = getattr(task, "config", None)
    metadata = getattr(config, "metadata", None)
    name = benchmarks.declared_benchmark({"metadata": metadata}) if isinstance(metadata, dict) else None
    if name is None or name not in benchmarks.names():
        return
    spec = benchmarks.get(name).prescore
    if spec and task.instances:
        from loguru import logger  # deferred: loguru (the harness's logger) is heavy to import

        done = benchmarks.resolve(spec)(task_pairs(task))
        logger.info(f"lmms-scene: pre-scored {done} of {len(task.instances)} answers of {config.task} in batches")


# -- aggregations that never lose a run ------------------------------------------------


def guarded_aggregation(fn):
    """Wrap a task's aggregation so a failure is reported, not raised: lmms-eval 0.7.3
    writes neither results nor samples when an aggregation raises, so hours of
    generations would be lost. A guarded aggregation logs the error and returns
    ``{"error": ...}`` (dict-valued keys) or None (numeric keys, printed as N/A)."""

    @functools.wraps(fn)
    def aggregate(items):
        try:
            return fn(items)
        except Exception as err:
            from loguru import logger  # deferred: loguru is heavy to import

            message = f"{type(err).__name__}: {err}"
            logger.error(f"lmms-scene: aggregation {fn.__name__} failed over {len(items)} rows: {message}")
            return {"error": message, "n_rows": len(items)} if getattr(fn, "returns_dict", False) else None

    return aggregate


def returns_dict(fn):
    """Mark an aggregation whose value is a dict (see :func:`guarded_aggregation`)."""
    fn.returns_dict = True
    return fn
