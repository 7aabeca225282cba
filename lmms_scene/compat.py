"""The one door to lmms-eval's internals: every import of a harness module and every
patch lmms-scene installs goes through here.

Each touch point is a small named function (or class) whose docstring says what it
relies on; :data:`TOUCH_POINTS` lists them all with the harness versions they were
verified on, and :func:`check` verifies that each one still holds against the installed
harness (the attribute exists, the signature has the parameters we pass, the source
still writes the keys we read), returning a message that names the touch point when it
does not. ``tests/test_compat.py`` runs it for every touch point, so a harness upgrade
that breaks one fails with that touch point's name.

Nothing here imports lmms-eval at module level: importing :mod:`lmms_scene` (or this
module) loads no harness; each function imports what it needs when it is called.

The version gate: :func:`verified` says whether the installed lmms-eval is one the
touch points were verified on; :func:`check` reports an unverified version next to each
problem, so a failure on a new release reads "verified on 0.7.3, installed 0.8.0: ...".
The patches themselves keep their own shape checks (a patch whose target is missing or
shaped differently warns or does nothing; it never breaks the harness).
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

#: the distribution name of the harness
HARNESS = "lmms-eval"
#: lmms-eval releases every touch point below was verified on
VERIFIED_VERSIONS = ("0.7.3",)


def installed_version() -> str | None:
    """The installed lmms-eval's version (``importlib.metadata``), or None."""
    try:
        return version(HARNESS)
    except PackageNotFoundError:
        return None


def verified(versions: tuple[str, ...] = VERIFIED_VERSIONS) -> bool:
    """Whether the installed lmms-eval is one of ``versions`` (the version gate)."""
    return installed_version() in versions


# -- a harness function wrapped once ---------------------------------------------------------


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
    setattr(wrapper, _ORIGINAL, original)
    setattr(owner, name, wrapper)
    return True


_ORIGINAL = "__lmms_scene_original__"


def unpatched(fn: Any) -> Any:
    """The harness's own function behind our wrappers (:func:`patch_once`)."""
    while hasattr(fn, _ORIGINAL):
        fn = getattr(fn, _ORIGINAL)
    return fn


# -- models: base class, request class, registry -------------------------------------------------


def model_base() -> type:
    """lmms-eval's model base class ``lmms_eval.api.model.lmms`` (our models subclass it;
    it sets ``_rank = 0`` / ``_world_size = 1`` and exposes them as ``rank`` / ``world_size``)."""
    from lmms_eval.api.model import lmms  # deferred: the harness (imports torch) is heavy to import

    return lmms


def request_class() -> type:
    """lmms-eval's request ``lmms_eval.api.instance.Instance`` (a dataclass: ``request_type``,
    ``arguments`` (exposed as ``args``), ``idx``, ``metadata``, ``task_name``, ``doc_id``,
    ``repeats``, ``filtered_resps``)."""
    from lmms_eval.api.instance import Instance  # deferred: the harness (imports torch) is heavy to import

    return Instance


def make_request(request_type: str, arguments: tuple, metadata: dict, idx: int = 0) -> Any:
    """A harness ``Instance`` built by lmms-scene (``scene_replay`` asks its inner model
    one such ``generate_until`` request per round)."""
    return request_class()(request_type=request_type, arguments=arguments, idx=idx, metadata=metadata)


def model_class(name: str, force_simple: bool = False) -> type:
    """The harness model class registered as ``name`` (``lmms_eval.models.get_model(name,
    force_simple=...)``)."""
    from lmms_eval import models  # deferred: the harness (imports torch) is heavy to import

    return models.get_model(name, force_simple=force_simple)


def model_manifest(model_id: str, simple_class_path: str | None, chat_class_path: str | None) -> Any:
    """One ``lmms_eval.models.registry_v2.ModelManifest`` (the payload of our
    ``lmms_eval.models`` entry point)."""
    from lmms_eval.models.registry_v2 import ModelManifest  # deferred: the harness (imports torch) is heavy to import

    return ModelManifest(model_id=model_id, simple_class_path=simple_class_path, chat_class_path=chat_class_path)


def set_process_group(model: Any, rank: int, world_size: int) -> None:
    """Record the process group a model runs in, in the base class's private
    ``_rank`` / ``_world_size`` (what its ``rank`` / ``world_size`` properties read, and
    what the harness shards documents by)."""
    model._rank, model._world_size = rank, world_size


# -- the one typed request ----------------------------------------------------------------------


@dataclass
class GenerationRequest:
    """A ``generate_until`` / ``generate_until_multi_round`` request's ``Instance.args``,
    by name. lmms-eval 0.7.3 packs them by position, three ways:

    - simple class, ``generate_until``: ``(context, gen_kwargs, doc_to_visual, doc_id, task, split)``;
    - simple class, multi-round: ``(context, gen_kwargs, doc_to_visual, doc_to_text, doc_id, task, split)``
      (``doc_to_text`` called with ``round_idx`` / ``previous_output`` / ``previous_round_info``);
    - chat class, either type: ``(context, doc_to_messages, gen_kwargs, doc_id, task, split)``.
    """

    context: str
    gen_kwargs: dict
    doc_id: int
    task: str
    split: str
    chat: bool = False
    doc_to_visual: Callable | None = None
    doc_to_text: Callable | None = None
    doc_to_messages: Callable | None = None

    @classmethod
    def from_args(cls, args: tuple, *, chat: bool, multi_round: bool) -> GenerationRequest:
        if chat:
            context, doc_to_messages, gen_kwargs, doc_id, task, split = args
            return cls(context, gen_kwargs, doc_id, task, split, chat=True, doc_to_messages=doc_to_messages)
        if multi_round:
            context, gen_kwargs, doc_to_visual, doc_to_text, doc_id, task, split = args
        else:
            (context, gen_kwargs, doc_to_visual, doc_id, task, split), doc_to_text = args, None
        return cls(context, gen_kwargs, doc_id, task, split, doc_to_visual=doc_to_visual, doc_to_text=doc_to_text)

    @classmethod
    def of(cls, request: Any, *, chat: bool, multi_round: bool) -> GenerationRequest:
        """The request of a harness ``Instance`` (its ``args``)."""
        return cls.from_args(request.args, chat=chat, multi_round=multi_round)

    def as_args(self) -> tuple:
        """The positional ``arguments`` of a single-round ``generate_until`` request."""
        if self.chat:
            return (self.context, self.doc_to_messages, self.gen_kwargs, self.doc_id, self.task, self.split)
        return (self.context, self.gen_kwargs, self.doc_to_visual, self.doc_id, self.task, self.split)


# -- per-round outputs -------------------------------------------------------------------------------


def literal(text: str) -> Any:
    """A Python literal the harness logged as its ``str()`` (a tuple of round outputs, a
    filter's dict), parsed with :func:`ast.literal_eval` (literals only), else None."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


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
        parsed = literal(outputs[0])
        if isinstance(parsed, tuple) and all(isinstance(x, str) for x in parsed):
            return list(parsed)
    return ["" if o is None else str(o) for o in outputs]


def unwrap_output(output: Any) -> tuple[Any, Any]:
    """What the harness keeps of a model's output and its token counts
    (``lmms_eval.api.instance.unwrap_generation_output``)."""
    from lmms_eval.api.instance import (
        unwrap_generation_output,
    )  # deferred: the harness (imports torch) is heavy to import

    return unwrap_generation_output(output)


# -- task index, printed table, filters, evaluator ----------------------------------------------------


def install_task_index_hook(
    extra_path: str,
    same_path: Callable[[Any], bool],
    on_index: Callable[[Any], None],
    mark: str,
    enabled: Callable[[], bool] = lambda: True,
) -> bool | str:
    """Make every ``lmms_eval.tasks.TaskManager.initialize_tasks(include_path,
    include_defaults)`` also index ``extra_path`` (when ``enabled()`` says so at that call)
    and hand its index to ``on_index``.

    Returns True when installed (or already); otherwise nothing changed and it returns
    ``"shape"`` when the harness is not the tested shape, or the import error as a string."""
    try:
        from lmms_eval.tasks import TaskManager  # deferred: the harness (imports torch) is heavy to import
    except Exception as err:  # the harness itself is broken; not ours to report
        return f"could not import lmms_eval.tasks ({err})"
    # (once wrapped, inspect follows __wrapped__ to the harness's own signature)
    params = list(inspect.signature(TaskManager.initialize_tasks).parameters)
    if params[:3] != ["self", "include_path", "include_defaults"]:
        return "shape"

    def wrap(original):
        @functools.wraps(original)
        def initialize_tasks(self, include_path=None, include_defaults=True):
            paths = [include_path] if isinstance(include_path, (str, os.PathLike)) else list(include_path or [])
            if enabled() and not any(same_path(p) for p in paths):
                paths.append(extra_path)
            index = original(self, include_path=paths, include_defaults=include_defaults)
            on_index(index)
            return index

        return initialize_tasks

    patch_once(TaskManager, "initialize_tasks", mark, wrap)
    return True


def task_manager() -> type:
    """``lmms_eval.tasks.TaskManager`` (index of every task the harness knows)."""
    from lmms_eval.tasks import TaskManager  # deferred: the harness (imports torch) is heavy to import

    return TaskManager


_TABLE_MARK = "__lmms_scene_numbers_only__"


def install_table_filter(
    filter_result: Callable[[dict], dict], notes: Callable[[dict, str], str] | None = None
) -> bool:
    """Make ``lmms_eval.utils.make_table(result_dict, column, ...)`` print
    ``filter_result(result_dict)`` followed by ``notes(result_dict, column)``, where it is
    defined and in the modules that imported it by name (``lmms_eval.evaluator``,
    ``lmms_eval.__main__``). Returns False (and changes nothing) when the harness has no
    ``make_table``."""
    try:
        import lmms_eval.utils as harness_utils  # deferred: the harness (imports torch) is heavy to import
    except Exception:  # pragma: no cover - the harness itself is broken
        return False
    original = getattr(harness_utils, "make_table", None)

    def wrap(make_table_fn):
        def make_table(result_dict, column: str = "results", *args, **kwargs):
            table = make_table_fn(filter_result(result_dict), column, *args, **kwargs)
            return table + notes(result_dict, column) if notes is not None and isinstance(table, str) else table

        return make_table

    if not patch_once(harness_utils, "make_table", _TABLE_MARK, wrap):
        return False
    # modules that imported the name before the hook ran hold the original
    for name in ("lmms_eval.evaluator", "lmms_eval.__main__"):
        module = sys.modules.get(name)
        if module is not None and original is not None and getattr(module, "make_table", None) is original:
            module.make_table = harness_utils.make_table
    return True


_PRESCORE_MARK = "__lmms_scene_prescore__"


def install_after_filters(callback: Callable[[Any], None]) -> bool:
    """After ``lmms_eval.api.task.ConfigurableTask.apply_filters(self)`` (every answer of
    this process is in, filtered), call ``callback(task)``; a failing callback is a
    warning naming the task, never an error. Returns whether the hook is installed."""
    try:
        from lmms_eval.api.task import ConfigurableTask  # deferred: the harness (imports torch) is heavy to import
    except Exception:  # pragma: no cover - the harness itself is broken
        return False

    def wrap(original):
        def apply_filters(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            try:
                callback(self)
            except Exception as err:
                task = getattr(getattr(self, "config", None), "task", "?")
                warnings.warn(
                    f"lmms-scene: batch pre-scoring of {task} failed ({err!r}); scoring row by row", stacklevel=2
                )
            return out

        return apply_filters

    return patch_once(ConfigurableTask, "apply_filters", _PRESCORE_MARK, wrap)


def task_pairs(task: Any, filter_key: str = "none") -> list[tuple[Any, Any]]:
    """``(doc, answer)`` for every request of a harness task after its filters ran, as
    ``process_results`` will see them (lmms-eval 0.7.3: a request's ``doc_id`` indexes
    ``task.eval_docs``; ``inst.filtered_resps[filter_key]``; a ``generate_until`` answer
    is stripped)."""
    docs = task.eval_docs
    pairs = []
    for inst in task.instances:
        answer = inst.filtered_resps.get(filter_key)
        if isinstance(answer, str):
            answer = answer.strip()
        pairs.append((docs[inst.doc_id], answer))
    return pairs


def evaluator_module() -> Any:
    """``lmms_eval.evaluator`` (its ``evaluate(lm, task_dict, ..., cli_args=...)`` is what the
    journal wraps)."""
    import lmms_eval.evaluator as evaluator  # deferred: the harness (imports torch) is heavy to import

    return evaluator


def install_evaluate_wrapper(wrap: Callable[[Callable], Callable], mark: str) -> bool:
    """Wrap ``lmms_eval.evaluator.evaluate`` once (``wrap(original)``); False (changing
    nothing) when the harness has none."""
    try:
        evaluator = evaluator_module()
    except Exception:  # pragma: no cover - the harness itself is broken
        return False
    return patch_once(evaluator, "evaluate", mark, wrap)


def leaf_tasks(task_dict: Any) -> list:
    """The leaf tasks of a built task dict (``lmms_eval.evaluator_utils.get_task_list``:
    each with ``.task`` (its ``instances``, ``config``) and ``.task_name``)."""
    from lmms_eval.evaluator_utils import get_task_list  # deferred: the harness (imports torch) is heavy to import

    return get_task_list(task_dict)


# -- the harness's version record --------------------------------------------------------------------

VERSION_FUNCTIONS = ("get_git_commit_hash", "get_git_branch_name", "get_lmms_eval_version_string")


def install_version_functions(commit: Callable, branch: Callable, version: Callable, mark: str) -> bool | None:
    """Replace ``lmms_eval.utils``'s :data:`VERSION_FUNCTIONS` (what the results file and
    banner record as the harness's commit, branch and version) by ours, there and in
    ``lmms_eval.evaluator`` when it already imported them by name (the evaluator is not
    imported here). None when the harness cannot be imported, False when it lacks them."""
    try:
        from lmms_eval import utils as harness_utils  # deferred: the harness (imports torch) is heavy to import
    except Exception:  # noqa: BLE001 - the harness itself is broken; not ours to report
        return None
    if not all(callable(getattr(harness_utils, n, None)) for n in VERSION_FUNCTIONS):
        return False
    for name, fn in zip(VERSION_FUNCTIONS, (commit, branch, version)):
        setattr(fn, mark, True)
        for module in (harness_utils, sys.modules.get("lmms_eval.evaluator")):
            if (
                module is not None
                and callable(getattr(module, name, None))
                and not getattr(getattr(module, name), mark, False)
            ):
                setattr(module, name, fn)
    return True


def harness_folder() -> str:
    """The folder of the installed ``lmms_eval`` package."""
    from lmms_eval import utils as harness_utils  # deferred: the harness (imports torch) is heavy to import

    return os.path.dirname(os.path.abspath(harness_utils.__file__))


# -- the harness's command line ----------------------------------------------------------------------


class HarnessCLI:
    """Run ``lmms_eval.__main__.cli_evaluate()`` in this process as if ``argv`` were its
    command line. Building it imports the harness's ``__main__``; within ``with`` it
    ``sys.argv`` is ``["lmms_eval", *argv]`` and ``cli_evaluate_single(args)`` is wrapped
    so every failure but ``SystemExit`` reaches ``on_failure`` (0.7.3 logs a failed
    evaluation and exits 0); the block gets the function that starts the run. Both are
    restored on the way out."""

    def __init__(self, argv: list[str], on_failure: Callable[[BaseException], None]) -> None:
        import lmms_eval.__main__ as harness  # deferred: the harness (imports torch) is heavy to import

        self._harness, self._argv, self._on_failure = harness, list(argv), on_failure
        self._saved: tuple[Any, list[str]] | None = None

    def __enter__(self) -> Callable[[], None]:
        harness, original = self._harness, self._harness.cli_evaluate_single
        on_failure = self._on_failure

        def evaluate_single(args):
            try:
                return original(args)
            except SystemExit:
                raise
            except BaseException as err:
                on_failure(err)
                raise

        self._saved = (original, sys.argv)
        harness.cli_evaluate_single = evaluate_single
        sys.argv = ["lmms_eval", *self._argv]
        return harness.cli_evaluate

    def __exit__(self, *exc: Any) -> None:
        original, argv = self._saved
        self._harness.cli_evaluate_single = original
        sys.argv = argv


def eval_arg_parser() -> Any:
    """The harness's own argument parser (``lmms_eval.__main__.parse_eval_args()`` returns
    ``(parser, args)``)."""
    import lmms_eval.__main__ as harness  # deferred: the harness (imports torch) is heavy to import

    parser, _ = harness.parse_eval_args()
    return parser


def retry_cause(err: BaseException) -> BaseException | None:
    """The exception inside tenacity's ``RetryError`` (``last_attempt.exception()``: the
    harness retries ``process_results`` 5 times with ``tenacity.retry``), else None."""
    last = getattr(err, "last_attempt", None)
    if last is not None and hasattr(last, "exception") and last.exception() is not None:
        return last.exception()
    return None


# -- judges --------------------------------------------------------------------------------------------


def judge_server(provider: str, **config: Any) -> Any:
    """lmms-eval's judge client: ``lmms_eval.llm_judge.get_server(provider, ServerConfig(**config))``."""
    from lmms_eval.llm_judge import ServerConfig, get_server  # deferred: the harness (imports torch) is heavy to import

    return get_server(provider, ServerConfig(**config))


def judge_request(messages: list[dict], config: Any) -> Any:
    """One ``lmms_eval.llm_judge.Request(messages=, config=)``."""
    from lmms_eval.llm_judge import Request  # deferred: the harness (imports torch) is heavy to import

    return Request(messages=messages, config=config)


# -- PIL's global flag ---------------------------------------------------------------------------------


def harness_sets_truncated_images() -> bool:
    """Whether importing the harness's task module leaves PIL's global
    ``ImageFile.LOAD_TRUNCATED_IMAGES`` on (0.7.3's ``lmms_eval/api/task.py`` sets it at
    import). Our decoders never read or set the flag: ``data/release.py`` decodes in full
    and refuses a cut file, and every builder and ``analysis/extract.py`` decode through it."""
    import lmms_eval.api.task  # noqa: F401  # deferred: the harness (imports torch) is heavy; the import is what sets the flag
    from PIL import ImageFile  # deferred: compat (imported at every harness start) loads no image library at import

    return bool(ImageFile.LOAD_TRUNCATED_IMAGES)


# -- results files ---------------------------------------------------------------------------------------

#: the keys of a harness ``*_results.json`` lmms-scene reads (results.py, from_samples.py,
#: report/submission.py, evaluate.py): per-task metrics as ``"<metric>,<filter>"``
RESULTS_KEYS = ("results", "group_subtasks", "configs", "versions", "n-samples", "config")
#: keys under ``config`` lmms-scene reads
RESULTS_CONFIG_KEYS = ("model", "model_args", "limit", "resolved_cli_args")


# -- the running evaluation's arguments ------------------------------------------------------------


def evaluation_args() -> Any | None:
    """The parsed command line of the harness evaluation this call runs inside: the ``args``
    of the nearest enclosing ``cli_evaluate_single(args)`` frame of lmms-eval's main module
    (touch point ``cli-args``), or None outside one (a notebook's ``TaskManager``, the
    harness's ``tasks`` sub-command, a test)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "cli_evaluate_single" and Path(code.co_filename).parent.name == "lmms_eval":
            args = frame.f_locals.get("args")
            return args if hasattr(args, "tasks") else None
        frame = frame.f_back
    return None
