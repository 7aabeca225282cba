"""The table of lmms-eval touch points and the check (split from :mod:`lmms_scene.compat`,
which stays the one door to lmms-eval's internals).

:data:`TOUCH_POINTS` lists every touch point with the harness versions it was verified on;
:func:`check` verifies that each one still holds against the installed harness (the
attribute exists, the signature has the parameters we pass, the source still writes the
keys we read), returning a message that names the touch point when it does not, and
:func:`require` raises :class:`HarnessChanged` with them. ``tests/test_compat.py`` runs it
for every touch point. Nothing here imports lmms-eval at module level.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from lmms_scene import compat
from lmms_scene.compat import (
    RESULTS_CONFIG_KEYS,
    RESULTS_KEYS,
    VERIFIED_VERSIONS,
    VERSION_FUNCTIONS,
    harness_sets_truncated_images,
    unpatched,
)

# -- the table of touch points and the check ---------------------------------------------------------------


@dataclass(frozen=True)
class TouchPoint:
    name: str
    #: what of the harness it touches
    touches: str
    #: where lmms-scene uses it
    used_by: str
    check: Callable[[], str | None]
    verified: tuple[str, ...] = VERIFIED_VERSIONS


class HarnessChanged(RuntimeError):
    """A touch point no longer holds against the installed harness."""


def _import(module: str) -> Any:
    return importlib.import_module(module)


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(unpatched(fn)).parameters)


def _needs_params(fn: Any, names: list[str]) -> str | None:
    have = _params(fn)
    missing = [n for n in names if n not in have]
    return f"{getattr(fn, '__qualname__', fn)} has parameters {have}, lacks {missing}" if missing else None


def _needs_attrs(owner: Any, names: list[str]) -> str | None:
    missing = [n for n in names if not hasattr(owner, n)]
    return f"{getattr(owner, '__name__', owner)} lacks {missing}" if missing else None


def _source_has(module: str, needles: list[str]) -> str | None:
    text = inspect.getsource(_import(module))
    missing = [n for n in needles if n not in text]
    return f"{module} no longer contains {missing}" if missing else None


def _check_task_index() -> str | None:
    params = _params(_import("lmms_eval.tasks").TaskManager.initialize_tasks)
    if params[:3] != ["self", "include_path", "include_defaults"]:
        return f"TaskManager.initialize_tasks has parameters {params}, not (self, include_path, include_defaults, ...)"
    return None


def _check_task_index_memo() -> str | None:
    manager = _import("lmms_eval.tasks").TaskManager
    method = getattr(manager, "_get_task_and_group", None)
    if method is None:
        return "TaskManager has no _get_task_and_group"
    if _params(method) != ["self", "task_dir"]:
        return f"TaskManager._get_task_and_group has parameters {_params(method)}, not (self, task_dir)"
    # the index depends on nothing but the YAML files under task_dir, which the memo keys on
    source = inspect.getsource(unpatched(method))
    missing = [
        n
        for n in ("os.walk(task_dir)", 'f.endswith(".yaml")', 'load_yaml_config(yaml_path, mode="simple")')
        if n not in source
    ]
    return (
        f"_get_task_and_group no longer reads only the YAML files under task_dir (lacks {missing})" if missing else None
    )


def _check_table() -> str | None:
    fn = getattr(_import("lmms_eval.utils"), "make_table", None)
    if fn is None:
        return "lmms_eval.utils has no make_table"
    params = _params(fn)
    return (
        None
        if params[:2] == ["result_dict", "column"]
        else f"make_table has parameters {params}, not (result_dict, column, ...)"
    )


def _check_apply_filters() -> str | None:
    task = _import("lmms_eval.api.task").ConfigurableTask
    return _needs_attrs(task, ["apply_filters", "eval_docs", "instances"]) or (
        None
        if _params(task.apply_filters) == ["self"]
        else f"ConfigurableTask.apply_filters has parameters {_params(task.apply_filters)}, not (self)"
    )


def _check_cli() -> str | None:
    main = _import("lmms_eval.__main__")
    return (
        _needs_attrs(main, ["cli_evaluate", "cli_evaluate_single", "parse_eval_args"])
        or _needs_params(main.cli_evaluate_single, ["args"])
        or (
            None
            if "cli_evaluate_single(" in inspect.getsource(main.cli_evaluate)
            else "cli_evaluate no longer calls cli_evaluate_single by name"
        )
    )


def _check_cli_args() -> str | None:
    main = _import("lmms_eval.__main__")
    fn = getattr(main, "cli_evaluate_single", None)
    if fn is None:
        return "lmms_eval.__main__ has no cli_evaluate_single"
    if _params(fn)[:1] != ["args"]:
        return f"cli_evaluate_single has parameters {_params(fn)}, not (args, ...)"
    source = inspect.getsource(fn)
    at_index, at_run = source.find("TaskManager("), source.find("simple_evaluate(")
    if at_index < 0 or at_run < 0 or at_index > at_run:
        return "cli_evaluate_single no longer builds its TaskManager before simple_evaluate (the pre-flight would run after the model loads)"
    for name in ("args.tasks", "args.include_path"):
        if name not in source:
            return f"cli_evaluate_single no longer reads {name}"
    return None


def _check_parse_eval_args() -> str | None:
    fn = getattr(_import("lmms_eval.__main__"), "parse_eval_args", None)
    if fn is None:
        return "lmms_eval.__main__ has no parse_eval_args"
    return None if _params(fn) == [] else f"parse_eval_args has parameters {_params(fn)}, not ()"


def _check_entry_point() -> str | None:
    ours = [e for e in entry_points(group="lmms_eval.models") if e.value.startswith("lmms_scene")]
    if not ours:
        return "no lmms_eval.models entry point of lmms_scene is installed (pip install -e .)"
    manifest = _import("lmms_eval.models.registry_v2").ModelManifest
    fields = getattr(manifest, "__dataclass_fields__", {})
    missing = [f for f in ("model_id", "simple_class_path", "chat_class_path") if f not in fields]
    if missing:
        return f"ModelManifest lacks the fields {missing}"
    return _needs_params(_import("lmms_eval.models").get_model, ["model_name", "force_simple"])


def _check_version_functions() -> str | None:
    return _needs_attrs(_import("lmms_eval.utils"), list(VERSION_FUNCTIONS))


def _check_instance() -> str | None:
    cls = _import("lmms_eval.api.instance").Instance
    fields = getattr(cls, "__dataclass_fields__", {})
    missing = [
        f
        for f in ("request_type", "arguments", "idx", "metadata", "task_name", "doc_id", "repeats", "filtered_resps")
        if f not in fields
    ]
    if missing:
        return f"Instance lacks the fields {missing}"
    return None if isinstance(getattr(cls, "args", None), property) else "Instance.args is no longer a property"


def _check_request_args() -> str | None:
    source = inspect.getsource(_import("lmms_eval.api.task"))
    layouts = {
        "simple generate_until": "arguments = (ctx, copy.deepcopy(self.config.generation_kwargs), self.doc_to_visual, doc_id, self.config.task, split)",
        "simple multi-round": "arguments = (ctx, copy.deepcopy(self.config.generation_kwargs), self.doc_to_visual, partial(self.config.doc_to_text",
        "chat": "arguments = (ctx, self.doc_to_messages, copy.deepcopy(self.config.generation_kwargs), doc_id, self.config.task, split)",
    }
    changed = [name for name, line in layouts.items() if line not in source]
    return (
        f"construct_requests packs {changed} requests differently from GenerationRequest's layout" if changed else None
    )


def _check_rank() -> str | None:
    base = _import("lmms_eval.api.model").lmms
    source = inspect.getsource(base)
    if "self._rank" not in source or "self._world_size" not in source:
        return "lmms no longer keeps _rank/_world_size"
    return (
        None
        if isinstance(getattr(base, "rank", None), property) and isinstance(getattr(base, "world_size", None), property)
        else "lmms.rank/world_size are no longer properties"
    )


def _check_unwrap() -> str | None:
    module = _import("lmms_eval.api.instance")
    if not callable(getattr(module, "unwrap_generation_output", None)):
        return "lmms_eval.api.instance has no unwrap_generation_output"
    text, _counts = module.unwrap_generation_output(["a", "b"])
    return None if text == ["a", "b"] else f"unwrap_generation_output(['a', 'b']) keeps {text!r}, not the list"


def _check_evaluator() -> str | None:
    evaluator = _import("lmms_eval.evaluator")
    return _needs_params(evaluator.evaluate, ["lm", "task_dict", "cli_args"]) or _needs_attrs(
        _import("lmms_eval.evaluator_utils"), ["get_task_list"]
    )


def _check_stringified() -> str | None:
    # the harness logs a non-JSON value (a tuple of round outputs, a filter's dict) as its str()
    return _source_has("lmms_eval.evaluator", ["filtered_resps"])


def _check_results_keys() -> str | None:
    return _source_has(
        "lmms_eval.evaluator",
        [f'"{k}"' for k in RESULTS_KEYS if k != "config"] + ['results["config"]', '"resolved_cli_args"'],
    )


def _check_retry() -> str | None:
    import tenacity  # deferred: only this check reads it, and it costs ~60 ms at every import of compat

    if not hasattr(tenacity.RetryError, "last_attempt") and "last_attempt" not in inspect.getsource(
        tenacity.RetryError
    ):
        return "tenacity.RetryError no longer has last_attempt"
    return _source_has("lmms_eval.api.task", ["@retry(stop=(stop_after_attempt(5)"])


def _check_judge() -> str | None:
    module = _import("lmms_eval.llm_judge")
    problem = _needs_attrs(module, ["ServerConfig", "get_server", "Request"])
    if problem:
        return problem
    return _needs_params(module.get_server, ["server_name", "config"]) or _needs_params(
        module.ServerConfig, ["model_name", "temperature", "max_tokens", "timeout", "num_retries", "retry_delay"]
    )


def _check_pil() -> str | None:
    return (
        None
        if harness_sets_truncated_images()
        else (
            "importing lmms_eval.api.task no longer turns PIL's LOAD_TRUNCATED_IMAGES on (the defences may be dropped)"
        )
    )


TOUCH_POINTS: tuple[TouchPoint, ...] = (
    TouchPoint(
        "task-index",
        "lmms_eval.tasks.TaskManager.initialize_tasks(self, include_path, include_defaults) wrapped",
        "registration.install_task_path_hook",
        _check_task_index,
    ),
    TouchPoint(
        "task-index-memo",
        "lmms_eval.tasks.TaskManager._get_task_and_group(self, task_dir) memoised (opt-in)",
        "tests/index_memo.py (the tests' fork server; test-only)",
        _check_task_index_memo,
    ),
    TouchPoint(
        "printed-table",
        "lmms_eval.utils.make_table(result_dict, column, ...) wrapped (also in evaluator, __main__)",
        "harness.install_table_filter",
        _check_table,
    ),
    TouchPoint(
        "apply-filters",
        "ConfigurableTask.apply_filters(self) wrapped; task.eval_docs, task.instances, filtered_resps",
        "harness.install_prescore_hook",
        _check_apply_filters,
    ),
    TouchPoint(
        "cli-evaluate",
        "lmms_eval.__main__.cli_evaluate / cli_evaluate_single(args) swapped, sys.argv swapped",
        "evaluate.run_harness",
        _check_cli,
    ),
    TouchPoint(
        "cli-args",
        "the args of lmms_eval.__main__.cli_evaluate_single(args), read from its frame after the task index "
        "(args.tasks, args.include_path); TaskManager built before simple_evaluate",
        "preflight.after_index",
        _check_cli_args,
    ),
    TouchPoint(
        "eval-arg-parser",
        "lmms_eval.__main__.parse_eval_args() -> (parser, args)",
        "tests/test_docs_commands.py",
        _check_parse_eval_args,
    ),
    TouchPoint(
        "models-entry-point",
        "lmms_eval.models entry-point group, registry_v2.ModelManifest, models.get_model(name, force_simple)",
        "models.MANIFESTS (installs task-index, printed-table, apply-filters, version-functions), models.replay",
        _check_entry_point,
    ),
    TouchPoint(
        "version-functions",
        "lmms_eval.utils.get_git_commit_hash / get_git_branch_name / get_lmms_eval_version_string replaced",
        "registration.install_version_fix",
        _check_version_functions,
    ),
    TouchPoint(
        "model-base",
        "lmms_eval.api.model.lmms subclassed; Instance fields read (task_name, doc_id, idx, repeats, ...)",
        "models._base, models.replay, models.from_samples, journal",
        _check_instance,
    ),
    TouchPoint(
        "request-args",
        "Instance.args packed by position (three layouts)",
        "GenerationRequest: models._base, models.replay",
        _check_request_args,
    ),
    TouchPoint(
        "process-group",
        "lmms's private _rank / _world_size behind rank / world_size",
        "models._base, models.replay",
        _check_rank,
    ),
    TouchPoint(
        "generation-output", "lmms_eval.api.instance.unwrap_generation_output", "journal.kept_output", _check_unwrap
    ),
    TouchPoint(
        "evaluator",
        "lmms_eval.evaluator.evaluate(lm, task_dict, ..., cli_args) wrapped; evaluator_utils.get_task_list",
        "journal.install, journal.plan, evaluate.run_harness",
        _check_evaluator,
    ),
    TouchPoint(
        "stringified-values",
        "the harness logs tuples and dicts as their str()",
        "round_outputs, models.from_samples._kept_repeats",
        _check_stringified,
    ),
    TouchPoint(
        "results-keys",
        f"*_results.json keys {RESULTS_KEYS} and config's {RESULTS_CONFIG_KEYS}",
        "results.py, models.from_samples.run_options, report/submission.py, evaluate.py",
        _check_results_keys,
    ),
    TouchPoint(
        "retry-error",
        "tenacity.RetryError.last_attempt around process_results (5 attempts)",
        "evaluate.root_cause",
        _check_retry,
    ),
    TouchPoint(
        "llm-judge",
        "lmms_eval.llm_judge.ServerConfig / get_server(server_name, config) / Request",
        "judges.py",
        _check_judge,
    ),
    TouchPoint(
        "pil-truncated-flag",
        "PIL's global ImageFile.LOAD_TRUNCATED_IMAGES, set on by lmms_eval.api.task at import",
        "data/release.decode_image (also used by analysis/extract.py)",
        _check_pil,
    ),
)


def touch_point(name: str) -> TouchPoint:
    for tp in TOUCH_POINTS:
        if tp.name == name:
            return tp
    raise KeyError(f"no lmms-eval touch point {name!r}; known: {[t.name for t in TOUCH_POINTS]}")


def check(name: str | None = None) -> list[str]:
    """Verify touch points (one by ``name``, else all) against the installed harness.
    Returns one message per touch point that no longer holds, each naming it, what it
    touches and the versions it was verified on; an empty list when all hold."""
    problems = []
    version = compat.installed_version()
    for tp in [touch_point(name)] if name else TOUCH_POINTS:
        try:
            problem = tp.check()
        except Exception as err:  # an import or attribute gone is the answer, not a crash
            problem = f"{type(err).__name__}: {err}"
        if problem:
            gate = "" if version in tp.verified else f"; installed lmms-eval {version}"
            problems.append(
                f"lmms-eval touch point {tp.name!r} ({tp.touches}; used by {tp.used_by}; verified on "
                f"{', '.join(tp.verified)}{gate}) no longer holds: {problem}"
            )
    return problems


def require(name: str | None = None) -> None:
    """:func:`check`, raising :class:`HarnessChanged` with every problem."""
    problems = check(name)
    if problems:
        raise HarnessChanged("\n".join(problems))
