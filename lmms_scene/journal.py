"""The generation journal of ``lmms-scene eval``: every output on disk as it arrives.

lmms-eval 0.7.3 asks a model for all of a request type's answers in one call
(``generate_until(requests)``) and writes nothing before every task is scored, so a run
stopped by SIGTERM or Ctrl-C (a preempted job, a wall-clock limit) loses everything it
generated. ``lmms-scene eval`` therefore hands the model its requests in chunks
(``LMMS_SCENE_JOURNAL_CHUNK``, default 32, rounded up to a multiple of the model's batch
size) and appends each chunk's outputs, with the requests that produced them, to a JSON
lines journal under ``--output_path`` (``lmms_scene_journal/<time>_<pid>_rank<r>.jsonl``),
flushed and fsynced per chunk. A kill therefore loses at most the chunk in flight.
``lmms-scene rescore JOURNAL`` scores what the journal holds without the model
(:func:`lmms_scene.evaluate.rescore`).

The journal changes nothing else: the model answers the same requests in the same order
(a chunk is a slice of the harness's own list), and the harness gets the same list of
answers back. With ``--batch_size 1`` (the harness's default, and what the multi-round
models need) chunking cannot change a single output; with larger batches the model
batches within a chunk, which groups requests differently only when it sorts them by
length across the whole call. ``LMMS_SCENE_JOURNAL=off`` switches the journal off.

Lines (``kind``): ``header`` (the run's options: argv, model, tasks, limit, offset,
repeats, reasoning tags, include path, seed; versions; rank), ``plan`` (every task's
requests: request type, document ids, repeats), ``output`` (task, doc_id, idx, copy =
the repeat, request type, the request's plain arguments: prompt, generation kwargs,
split; the output as the harness keeps it), ``end`` (``finished``, ``interrupted`` with
the signal, or ``failed`` with the error; requests done of the total).

Every line ends with ``"sum"``: a running SHA-256 over the file's lines so far (the
previous line's sum and this line's text without its sum). Reading a journal back
(:func:`read`, in :mod:`lmms_scene.journal_read`: ``rescore``, ``--resume``) recomputes the chain, so a line edited, added,
removed or moved after it was written, a changed plan, or a line after the end line is
refused naming the line and the reason; every line is checked for its fields and their
types (a malformed line is a one-line error, never a traceback). The sums are evidence
against edits, not a signature: there is no secret, so whoever recomputes the whole chain
can forge one. Journals written before the sums (``journal_version`` 1) are read with a
notice that they cannot be checked (:attr:`JournalRun.unverified`).

The harness touch points (lmms-eval 0.7.3) go through :mod:`lmms_scene.compat`:
``lmms_eval.evaluator.evaluate`` (``evaluator``: wrapped, it receives the model and the
built tasks), the model's ``generate_until`` / ``generate_until_multi_round`` (shadowed
on the instance for the run), ``Instance.task_name/doc_id/idx/repeats/request_type/args``
(``model-base``), ``task.instances`` of the leaf tasks (``compat.leaf_tasks``) and
``lmms_eval.api.instance.unwrap_generation_output`` (``generation-output``: what the
harness keeps of an output). A plain ``python -m lmms_eval`` run gets no journal.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from lmms_scene import compat, settings
from lmms_scene.journal_read import _SEED, line_sum
from lmms_scene.journal_read import FOLDER as FOLDER
from lmms_scene.journal_read import GENERATION_TYPES as GENERATION_TYPES
from lmms_scene.journal_read import VERSION as VERSION
from lmms_scene.journal_read import JournalRefused as JournalRefused
from lmms_scene.journal_read import JournalRun as JournalRun
from lmms_scene.journal_read import ReplayPlan as ReplayPlan
from lmms_scene.journal_read import journal_files as journal_files
from lmms_scene.journal_read import planned_docs as planned_docs
from lmms_scene.journal_read import read as read
from lmms_scene.journal_read import replay_plan as replay_plan
from lmms_scene.journal_read import unverified_notes as unverified_notes

_MARK = "__lmms_scene_journal__"


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it (strings, numbers, lists, dicts), else None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return None


def request_arguments(request: Any) -> list:
    """A request's plain arguments (prompt, generation kwargs, doc id, task, split): what
    the journal keeps of the request, and what a resumed run must ask again."""
    return [_plain(a) for a in request.args if _plain(a) is not None]


def kept_output(output: Any) -> tuple[Any, Any]:
    """What the harness keeps of a model's output (``unwrap_generation_output``: the text,
    a multi-round list, or ``str()`` of anything else) and its token counts."""
    text, counts = compat.unwrap_output(output)
    to_dict = getattr(counts, "to_dict", None)
    return text, (to_dict() if callable(to_dict) else None)


class Journal:
    """One process's journal file (append-only JSON lines, fsynced per write)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.total = 0
        self.closed = False
        self._sum = _SEED

    @property
    def done(self) -> int:
        """The output records the file holds. Counted from the file, not kept in a counter:
        a signal (raised as :class:`Interrupted` between any two bytecodes) can land after a
        chunk is written and before a counter is raised, and the end record would then say
        one chunk fewer than the journal holds."""
        with self._lock:
            if not self.path.is_file():
                return 0
            with self.path.open(encoding="utf-8") as f:
                return sum(1 for line in f if line.startswith('{"kind": "output"'))

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        # ensure_ascii: a lone surrogate in an output is written as an escape, never an error
        bodies = [json.dumps(r, ensure_ascii=True, default=str) for r in records]
        if not bodies:
            return
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            lines, chain = [], self._sum
            for body in bodies:
                chain = line_sum(chain, body)
                lines.append(f'{body[:-1]}, "sum": "{chain}"}}\n')
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
            self._sum = chain

    def outputs(
        self,
        request_type: str,
        requests: list,
        outputs: list,
        copies: list[int],
        arguments: list[list],
        resumed: set[int] = frozenset(),
    ) -> None:
        records = []
        for i, (request, output, copy, asked) in enumerate(zip(requests, outputs, copies, arguments)):
            text, counts = kept_output(output)
            record = {
                "kind": "output",
                "task": request.task_name,
                "doc_id": request.doc_id,
                "idx": request.idx,
                "copy": copy,
                "request_type": request_type,
                "arguments": asked,
                "output": _plain(text),
                "token_counts": counts,
            }
            if i in resumed:
                record["resumed"] = True
            records.append(record)
        self.write(records)

    def end(self, status: str, **details: Any) -> None:
        if self.closed:
            return
        self.closed = True
        self.write(
            [
                {
                    "kind": "end",
                    "status": status,
                    "requests_done": self.done,
                    "requests_total": self.total,
                    "time": time.time(),
                    **details,
                }
            ]
        )


# -- the run's options and plan ------------------------------------------------------------


def _versions() -> dict[str, str]:
    out = {}
    for name in ("lmms-scene", "lmms-eval"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    return out


def header(cli_args: Any, lm: Any, chunk: int) -> dict[str, Any]:
    rank, world, _ = settings.process_group()
    get = lambda name: _plain(getattr(cli_args, name, None))  # noqa: E731
    return {
        "kind": "header",
        "journal_version": VERSION,
        "versions": _versions(),
        "time": time.time(),
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "model": get("model"),
        "model_args": get("model_args"),
        "model_class": type(lm).__name__,
        "tasks": get("tasks"),
        "limit": get("limit"),
        "offset": get("offset"),
        "repeats": get("repeats"),
        "reasoning_tags": get("reasoning_tags"),
        "include_path": get("include_path"),
        "seed": get("seed"),
        "batch_size": get("batch_size"),
        "gen_kwargs": get("gen_kwargs"),
        "system_instruction": get("system_instruction"),
        "apply_chat_template": get("apply_chat_template"),
        "num_fewshot": get("num_fewshot"),
        "force_simple": get("force_simple"),
        "rank": rank,
        "world_size": world,
        "chunk": chunk,
    }


def plan(task_dict: Any) -> dict[str, Any]:
    """Every leaf task's requests as the harness built them (before any is answered)."""
    tasks: dict[str, Any] = {}
    for output in compat.leaf_tasks(task_dict):
        task = output.task
        instances = list(getattr(task, "instances", None) or [])
        types = sorted({i.request_type for i in instances})
        tasks[output.task_name] = {
            "request_types": types,
            "doc_ids": sorted({int(i.doc_id) for i in instances if not (i.metadata or {}).get("__padding_only__")}),
            "requests_per_doc": max(Counter(int(i.doc_id) for i in instances).values(), default=0),
            "repeats": max(
                (int(i.repeats or 1) for i in instances), default=int(getattr(task.config, "repeats", 1) or 1)
            ),
        }
    return {"kind": "plan", "tasks": tasks}


def chunk_size(lm: Any, configured: int) -> int:
    """``configured`` rounded up to a multiple of the model's batch size (an int, else 1)."""
    batch = getattr(lm, "batch_size", None)
    batch = batch if isinstance(batch, int) and batch > 0 else 1
    return -(-configured // batch) * batch


# -- wrapping the harness -------------------------------------------------------------------


@dataclass
class Active:
    """The journal of the evaluation in progress in this process (None between runs)."""

    journal: Journal | None = None


ACTIVE = Active()


def _journaled(journal: Journal, request_type: str, generate: Any, chunk: int, resume: JournalRun | None = None):
    copies: Counter = Counter()

    def run(requests):
        requests = list(requests)
        out: list = []
        for start in range(0, len(requests), chunk):
            part = requests[start : start + chunk]
            keys = []
            for request in part:
                key = (request.task_name, int(request.doc_id), int(request.idx or 0))
                keys.append((*key, copies[key]))
                copies[key] += 1
            # the requests as asked (a model may change its generation kwargs in place)
            asked = [request_arguments(r) for r in part]
            served = (
                {i: resume.served(request_type, a, k) for i, (a, k) in enumerate(zip(asked, keys))} if resume else {}
            )
            served = {i: v for i, v in served.items() if v is not None}
            todo = [r for i, r in enumerate(part) if i not in served]
            got = generate(todo) if todo else []
            got = list(got) if not isinstance(got, list) else got
            if len(got) != len(todo):
                raise RuntimeError(
                    f"lmms-scene journal: {request_type} returned {len(got)} outputs for {len(todo)} requests"
                )
            fresh = iter(got)
            merged = [served[i][0] if i in served else next(fresh) for i in range(len(part))]
            journal.outputs(request_type, part, merged, [k[3] for k in keys], asked, resumed=set(served))
            out.extend(merged)
        return out

    setattr(run, _MARK, True)
    return run


#: the options a resumed run must share with the journal it resumes (parsed lmms_eval arguments)
RESUME_OPTIONS = (
    "model",
    "model_args",
    "tasks",
    "limit",
    "offset",
    "repeats",
    "gen_kwargs",
    "reasoning_tags",
    "batch_size",
    "system_instruction",
    "apply_chat_template",
    "num_fewshot",
    "force_simple",
)


def check_resume(run: JournalRun, cli_args: Any) -> None:
    """A resumed run must be the run the journal comes from: the options that decide what
    is asked and answered must agree (an error names the first that does not)."""
    for name in RESUME_OPTIONS:
        if name not in run.header:  # a journal from before the option was recorded
            continue
        mine, theirs = _plain(getattr(cli_args, name, None)), run.header[name]
        if mine != theirs:
            raise ValueError(
                f"--resume: this run's {name} {mine!r} differs from the journal's {theirs!r} ({run.files[0]}); "
                "resume with the interrupted run's own arguments"
            )


def install(output_dir: str | Path | None, chunk: int, *, announce=print, resume: JournalRun | None = None) -> bool:
    """Wrap lmms-eval's ``evaluate`` so the model's generations are journaled under
    ``output_dir`` (see the module docstring); with ``resume`` (an interrupted run's
    journal), the requests it answered are served from it, checked to be the same
    requests, and only the others reach the model. Returns False (changing nothing) when
    the harness has no ``lmms_eval.evaluator.evaluate``; True when the wrapper is in place."""

    def wrap(original):
        def evaluate(*args, **kwargs):
            lm = kwargs.get("lm", args[0] if args else None)
            cli_args = kwargs.get("cli_args")
            out_dir = output_dir if output_dir is not None else getattr(cli_args, "output_path", None)
            if lm is None or not out_dir or type(lm).__name__ == "SceneFromSamples":
                return original(*args, **kwargs)

            if resume is not None:
                check_resume(resume, cli_args)
            rank = settings.process_group()[0]
            size = chunk_size(lm, chunk)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            journal = Journal(Path(out_dir) / FOLDER / f"{stamp}_{os.getpid()}_rank{rank}.jsonl")
            journal.write([header(cli_args, lm, size)])
            ACTIVE.journal = journal
            announce(f"lmms-scene eval: journaling generations to {journal.path} (chunks of {size})")
            task_dict = kwargs.get("task_dict", args[1] if len(args) > 1 else {})
            planned = threading.Event()

            def with_plan(journaled):
                def call(requests):
                    if not planned.is_set():  # every task's requests are built before the first call
                        planned.set()
                        record = plan(task_dict)
                        journal.total = sum(
                            len(t["doc_ids"]) * t["requests_per_doc"] * t["repeats"] for t in record["tasks"].values()
                        )
                        journal.write([record])
                    return journaled(requests)

                setattr(call, _MARK, True)
                return call

            shadowed = []
            for request_type in GENERATION_TYPES:
                method = getattr(lm, request_type, None)
                if method is None or getattr(method, _MARK, False):
                    continue
                lm.__dict__[request_type] = with_plan(_journaled(journal, request_type, method, size, resume))
                shadowed.append(request_type)
            try:
                result = original(*args, **kwargs)
            except KeyboardInterrupt as stop:
                journal.end("interrupted", signal=getattr(stop, "signal_name", "SIGINT"))
                raise
            except BaseException as err:
                journal.end("failed", error=f"{type(err).__name__}: {err}")
                raise
            else:
                journal.end("finished")
                return result
            finally:
                for request_type in shadowed:
                    lm.__dict__.pop(request_type, None)

        return evaluate

    return compat.install_evaluate_wrapper(wrap, _MARK)


# -- signals ----------------------------------------------------------------------------------


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) during ``lmms-scene eval``: raised in the main thread so the
    harness unwinds (the journal records it); a second signal kills at once."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(self.signal_name)


def catch_signals() -> dict[int, Any]:
    """Turn SIGTERM and SIGINT into :class:`Interrupted` (main thread only); returns the
    previous handlers for :func:`restore_signals`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}

    def handler(signum, _frame):
        restore_signals(previous)  # a second signal: the default (immediate) behaviour
        raise Interrupted(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, handler)
    return previous


def restore_signals(previous: dict[int, Any]) -> None:
    for signum, old in list(previous.items()):
        try:
            signal.signal(signum, old if old is not None else signal.SIG_DFL)
        except (ValueError, TypeError):  # pragma: no cover - not the main thread
            pass
