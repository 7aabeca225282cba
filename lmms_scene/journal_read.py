"""Reading a generation journal back (:mod:`lmms_scene.journal` writes it): every line
checked for its fields and types, the running SHA-256 chain recomputed (a line edited,
added, removed or moved is refused naming it), the run's plan and outputs
(:class:`JournalRun`), the replay plan of an interrupted run (``rescore``, ``eval
--resume``). The journal's format (version, folder, the checksum of a line) is defined
here, where it is read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene.files import loads

#: 2: every line carries the running checksum ``sum``; 1: no checksums
VERSION = 2


#: the chain's start (the "previous sum" of the first line)
_SEED = "lmms-scene journal"


_SUM = re.compile(r', "sum": "([0-9a-f]{64})"\}$')


FOLDER = "lmms_scene_journal"


#: the request types journaled (every generation type; loglikelihood is not generation)
GENERATION_TYPES = ("generate_until", "generate_until_multi_round")


def line_sum(previous: str, body: str) -> str:
    """The running checksum of a journal line: SHA-256 of the previous line's sum and this
    line's JSON text without its ``sum``."""
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


# -- reading a journal back ---------------------------------------------------------------------


@dataclass
class JournalRun:
    """A journal read back: its files, the run's header, the plan, the outputs by
    (task, doc_id, idx) and copy, how it ended, and lines that could not be read."""

    files: list[Path]
    header: dict[str, Any]
    tasks: dict[str, Any]
    outputs: dict[tuple[str, int, int], dict[int, Any]]
    ends: list[dict[str, Any]]
    problems: list[str]
    #: (task, doc_id, idx, copy) -> (request type, the request's plain arguments)
    requests: dict[tuple[str, int, int, int], tuple[str, list]] = field(default_factory=dict)
    #: files whose lines carry no checksums (``journal_version`` 1): read, not verifiable
    unverified: list[Path] = field(default_factory=list)

    def served(self, request_type: str, now: list, key: tuple[str, int, int, int]) -> tuple[Any] | None:
        """The journaled output for this request and copy (a 1-tuple), or None when the
        journal has none; a journaled request whose arguments differ from ``now``
        (another prompt or generation kwargs: not the same run) is an error naming it."""
        by_copy = self.outputs.get(key[:3])
        if not by_copy or key[3] not in by_copy:
            return None
        kind, arguments = self.requests.get(key, (request_type, None))
        if kind != request_type or arguments != now:
            raise ValueError(
                f"--resume: the journal's request for task {key[0]!r} doc {key[1]} (repeat {key[3] + 1}) is not this run's "
                f"({kind} {str(arguments)[:200]} vs {request_type} {str(now)[:200]}); resume with the interrupted run's own arguments"
            )
        return (by_copy[key[3]],)

    def status(self) -> str:
        states = {e.get("status") for e in self.ends}
        if len(self.ends) < len(self.files):
            return "cut off"  # a process killed without a chance to write its end
        return states.pop() if len(states) == 1 else "mixed"

    def complete_docs(self, task: str) -> list[int]:
        """The task's documents with every request and every repeat journaled."""
        info = self.tasks[task]
        need_copies, need_idx = info["repeats"], info["requests_per_doc"]
        done = []
        for doc_id in info["doc_ids"]:
            ok = all(len(self.outputs.get((task, doc_id, idx), {})) >= need_copies for idx in range(need_idx))
            if ok:
                done.append(doc_id)
        return done


@dataclass
class ReplayPlan:
    """What of an interrupted run can be scored: tasks with every document generated,
    tasks whose first ``prefix`` documents were (task -> (prefix, planned, generated after
    a gap, left out)), and tasks with nothing generated."""

    complete: list[str]
    partial: dict[str, tuple[int, int, int]]
    none: list[str]


def replay_plan(run: JournalRun, offset: int = 0) -> ReplayPlan:
    """Per task, the longest run of documents from the first one whose every request and
    repeat is journaled: a harness replay can select the first N documents (``--offset``,
    ``--limit``), not a scattered set. A task whose documents do not start at ``offset``
    (they are numbered by the harness from there) is an error naming it."""
    complete, partial, none = [], {}, []
    for task in sorted(run.tasks):
        planned = run.tasks[task]["doc_ids"]
        done = set(run.complete_docs(task))
        prefix = 0
        while prefix < len(planned) and planned[prefix] in done:
            prefix += 1
        if prefix == len(planned):
            complete.append(task)
        elif prefix == 0:
            none.append(task)
        else:
            if planned[:prefix] != list(range(offset, offset + prefix)):
                raise ValueError(
                    f"{task}: its documents are not numbered from the run's --offset {offset} "
                    f"({planned[:3]}...); a partial replay needs the first documents"
                )
            partial[task] = (prefix, len(planned), len(done) - prefix)
    return ReplayPlan(complete, partial, none)


def journal_files(paths: str | Path | list) -> list[Path]:
    """The journal files in ``paths`` (files, or folders searched for ``lmms_scene_journal``);
    from a folder, the newest run's files (one per rank)."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    found: list[Path] = []
    for item in map(Path, items):
        if item.is_dir():
            here = sorted(item.rglob(f"{FOLDER}/*.jsonl"))
            if here:
                # the newest run: the newest file, and the other ranks' files of the same run
                # (same command line and process count, started within two minutes)
                heads = {p: _first_record(p) for p in here}
                newest = max(here, key=lambda p: (heads[p].get("time", 0), p.name))
                ref = heads[newest]
                found += [
                    p
                    for p in here
                    if p.parent == newest.parent
                    and heads[p].get("argv") == ref.get("argv")
                    and heads[p].get("world_size") == ref.get("world_size")
                    and abs(heads[p].get("time", 0) - ref.get("time", 0)) < 120
                ]
        elif item.is_file():
            found.append(item)
        else:
            raise FileNotFoundError(f"{item}: no such journal file or folder")
    return sorted(set(found))


def _first_record(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            record = json.loads(f.readline())
    except (OSError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


class JournalRefused(ValueError):
    """A journal line that is malformed, or was changed after it was written."""


def _is(value: Any, kind: type | tuple, minimum: int | None = None) -> bool:
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, kind) and (minimum is None or value >= minimum)


#: what each checked field holds, for the error
_EXPECTED = {
    "argv": "expected a list of strings",
    "rank": "expected an integer >= 0",
    "world_size": "expected an integer >= 1",
    "tasks": "expected the tasks as given, or the plan's tasks: name -> request types, document ids, requests per document, repeats",
    "offset": "expected an integer >= 0",
    "repeats": "expected an integer >= 1",
    "limit": "expected a number >= 0",
    "task": "expected a task name",
    "doc_id": "expected an integer >= 0",
    "idx": "expected an integer >= 0",
    "copy": "expected an integer >= 0",
    "request_type": f"expected one of {GENERATION_TYPES}",
    "arguments": "expected the request's arguments, a list",
    "output": "expected a text, a list of texts, or null",
    "status": "expected finished, interrupted or failed",
    "requests_done": "expected an integer >= 0",
}


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _check_record(record: Any) -> str | None:
    """What is wrong with one journal record's fields (None: nothing)."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    kind = record.get("kind")
    need: dict[str, Any]
    if kind == "header":
        need = {
            "argv": lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
            "rank": lambda v: _is(v, int, 0),
            "world_size": lambda v: _is(v, int, 1),
            "tasks": lambda v: v is None or isinstance(v, str),
            "offset": lambda v: v is None or _is(v, int, 0),
            "repeats": lambda v: v is None or _is(v, int, 1),
            "limit": lambda v: v is None or _is(v, (int, float), 0),
        }
        optional = {"world_size", "rank", "offset", "repeats", "limit", "tasks"}
    elif kind == "plan":

        def tasks(v):
            return isinstance(v, dict) and all(
                isinstance(t, dict)
                and isinstance(t.get("request_types"), list)
                and all(isinstance(r, str) for r in t["request_types"])
                and isinstance(t.get("doc_ids"), list)
                and all(_is(d, int, 0) for d in t["doc_ids"])
                and _is(t.get("requests_per_doc"), int, 0)
                and _is(t.get("repeats"), int, 1)
                for t in v.values()
            )

        need, optional = {"tasks": tasks}, set()
    elif kind == "output":
        need = {
            "task": lambda v: isinstance(v, str) and bool(v),
            "doc_id": lambda v: _is(v, int, 0),
            "idx": lambda v: _is(v, int, 0),
            "copy": lambda v: _is(v, int, 0),
            "request_type": lambda v: v in GENERATION_TYPES,
            "arguments": lambda v: isinstance(v, list),
            "output": lambda v: (
                v is None
                or isinstance(v, str)
                or (isinstance(v, list) and all(isinstance(x, str) or x is None for x in v))
            ),
        }
        optional = set()
    elif kind == "end":
        need = {
            "status": lambda v: v in ("finished", "interrupted", "failed"),
            "requests_done": lambda v: _is(v, int, 0),
        }
        optional = set()
    else:
        return f"unknown record kind {str(kind)[:40]!r}"
    for name, ok in need.items():
        if name not in record:
            if name in optional:
                continue
            return f"{_a(kind)} line without its field {name!r}"
        if not ok(record[name]):
            shown = json.dumps(record[name], default=str)
            return f"{_a(kind)} line whose field {name!r} is {shown[:60]}{'...' if len(shown) > 60 else ''} ({_EXPECTED.get(name, 'not what lmms-scene writes')})"
    return None


def _read_file(f: Path) -> tuple[list[tuple[int, dict]], list[str], bool]:
    """One journal file's records (line number, record), checked: the chain of sums, the
    fields, the order (header first, one plan, nothing after the end line). Returns the
    records, what was skipped (a last line cut by a kill), and whether the file carries
    sums. Anything else wrong is a :class:`JournalRefused` naming the line."""
    try:
        text = f.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise JournalRefused(
            f"{f}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); not a journal lmms-scene wrote"
        ) from None
    lines = text.split("\n")
    last_line = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    records: list[tuple[int, dict]] = []
    problems: list[str] = []
    chain, signed = _SEED, None
    kinds: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{f} line {number}"
        try:
            record = loads(line, where=str(f), line=number, allow_nan=False, error=JournalRefused)
        except JournalRefused as exc:
            if number == last_line and not text.endswith("\n") and "not JSON" in str(exc):
                problems.append(f"{where}: cut off by the interruption (not JSON); skipped")
                continue
            raise JournalRefused(f"{exc}; refused") from None
        if not isinstance(record, dict):
            raise JournalRefused(f"{where}: expected a JSON object, got {type(record).__name__}; refused")
        if signed is None:  # the header says whether the file carries sums
            signed = record.get("kind") == "header" and _is(record.get("journal_version"), int, 2)
        if signed:
            match = _SUM.search(line)
            if match is None:
                raise JournalRefused(
                    f'{where}: no checksum (every line of a version-{VERSION} journal ends with its "sum"): '
                    "added or edited after the run wrote it; refused"
                )
            chain = line_sum(chain, line[: match.start()] + "}")
            if match.group(1) != chain:
                raise JournalRefused(
                    f"{where}: the checksum does not match the lines up to here: this line or one before it was "
                    "edited, added, removed or moved after the run wrote it; refused"
                )
            record.pop("sum", None)
        elif "sum" in record:
            raise JournalRefused(f"{where}: a checksum in a journal whose header declares none; refused")
        problem = _check_record(record)
        if problem:
            raise JournalRefused(f"{where}: {problem}; refused")
        kind = record["kind"]
        if not kinds and kind != "header":
            raise JournalRefused(f"{where}: the first line must be the header, not {_a(kind)} line; refused")
        if kinds and kind == "header":
            raise JournalRefused(f"{where}: a second header; refused")
        if kind == "plan" and "plan" in kinds:
            raise JournalRefused(f"{where}: a second plan; refused")
        if kind == "output" and "plan" not in kinds:
            raise JournalRefused(f"{where}: an output before the plan; refused")
        if "end" in kinds:
            raise JournalRefused(f"{where}: {_a(kind)} line after the end line; refused")
        kinds.append(kind)
        records.append((number, record))
    return records, problems, bool(signed)


def read(files: list[Path]) -> JournalRun:
    """Read journal files (one per rank of one run), checked line by line (:func:`_read_file`):
    a line cut off by a kill (the last, not JSON) is reported in ``problems`` and skipped,
    never guessed; any other malformed or changed line is a :class:`JournalRefused`
    (a ``ValueError``) naming the file, the line and the reason."""
    headers, plans, ends, problems, unverified = [], [], [], [], []
    outputs: dict[tuple[str, int, int], dict[int, Any]] = {}
    requests: dict[tuple[str, int, int, int], tuple[str, list]] = {}
    for f in files:
        records, skipped, signed = _read_file(Path(f))
        problems += skipped
        if not signed and records:
            unverified.append(Path(f))
        seen: dict[tuple, int] = {}
        count = 0
        for number, record in records:
            kind = record["kind"]
            if kind == "header":
                headers.append(record)
            elif kind == "plan":
                plans.append(record)
            elif kind == "end":
                if record["requests_done"] != count:
                    raise JournalRefused(
                        f"{f} line {number}: the end line counts {record['requests_done']} outputs, the file holds {count}; refused"
                    )
                ends.append(record)
            else:
                count += 1
                key = (record["task"], record["doc_id"], record["idx"])
                full = (*key, record["copy"])
                if full in seen:
                    raise JournalRefused(
                        f"{f} line {number}: task {key[0]!r} doc {key[1]} request {key[2]} repeat {full[3] + 1} "
                        f"again (first on line {seen[full]}); refused"
                    )
                seen[full] = number
                outputs.setdefault(key, {})[record["copy"]] = record["output"]
                requests[full] = (record["request_type"], record["arguments"])
    if not headers:
        raise ValueError(f"{', '.join(map(str, files))}: not an lmms-scene journal (no header line)")
    first = headers[0]
    for h in headers[1:]:
        for key in ("argv", "model", "model_args", "tasks", "limit", "offset", "repeats", "world_size"):
            if h.get(key) != first.get(key):
                raise ValueError(
                    f"journal files from different runs: {key} {first.get(key)!r} vs {h.get(key)!r}; rescore one run at a time"
                )
    ranks = sorted(h.get("rank", 0) for h in headers)
    if ranks != list(range(int(first.get("world_size") or 1))):
        raise ValueError(
            f"the journal of a {first.get('world_size')}-process run needs every rank's file; found ranks {ranks} "
            f"({', '.join(map(str, files))})"
        )
    tasks: dict[str, Any] = {}
    for p in plans:
        for name, info in p["tasks"].items():
            entry = tasks.setdefault(name, {**info, "doc_ids": []})
            entry["doc_ids"] = sorted(set(entry["doc_ids"]) | set(info["doc_ids"]))
    one_process = int(first.get("world_size") or 1) == 1  # (several: a rank pads its share with other ranks' documents)
    for (task, doc_id, idx), by_copy in outputs.items():
        info = tasks.get(task)
        if info is None or (one_process and (doc_id not in info["doc_ids"] or max(by_copy) >= info["repeats"])):
            raise JournalRefused(
                f"{', '.join(map(str, files))}: an output for task {task!r} doc {doc_id} request {idx} "
                f"that the plan does not hold; refused"
            )
    return JournalRun(list(files), first, tasks, outputs, ends, problems, requests, unverified)


def unverified_notes(run: JournalRun) -> list[str]:
    """One notice per file read without checksums (a journal from before they existed)."""
    return [
        f"{f}: written before journal lines carried checksums (journal_version 1): read as it is, "
        "its lines cannot be checked for edits"
        for f in run.unverified
    ]


def planned_docs(path: str | Path) -> dict[str, int] | None:
    """Documents per task in a one-process journal's plan (None: no plan yet, or a rank of
    a multi-process run, whose plan holds its share only)."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                if record.get("kind") == "header" and int(record.get("world_size") or 1) != 1:
                    return None
                if record.get("kind") == "plan":
                    return {name: len(info["doc_ids"]) for name, info in record["tasks"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None
