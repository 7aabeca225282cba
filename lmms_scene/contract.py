"""The benchmark contract: what a benchmark provides, as typed Protocols.

A benchmark is one registry entry (:class:`lmms_scene.benchmarks.Benchmark`) naming three
modules by their dotted paths; each must satisfy its Protocol here, member by member, with
signatures that accept the calls below (tests/test_contract.py checks every registered
benchmark, built in or registered through :func:`lmms_scene.benchmarks.register`):

- the **data module** (``Benchmark.data_module``, :class:`DataModule`): the schema
  (``features()``), the embedded sample (``build_sample``), the load-time check of a loaded
  split (``ensure_schema``) and of one row (``loaded_row_problem``), the dataset card
  (``card``), a local build (``write_local``) and the builder ``publish`` runs
  (``publish_build``);
- the **scoring module** (``Benchmark.scoring_module``, :class:`ScoringModule`): one scored
  row per item, and the fields that identify an item and hold its gold answer;
- the **results module** (``Benchmark.results_module``, :class:`ResultsModule`): what
  ``show``, ``report``, the HTML page, submissions and the leaderboard read from a results
  file: the report, its summary and failures, the scored rows and their recomputation, the
  tables (``view``).

Optional parts are declared in the registry entry, never discovered by ``hasattr``:
``Benchmark.pooled`` (the benchmark's headline pools the rows of several tasks, so its results
module is a :class:`PooledResultsModule` with ``group_summary``), ``Benchmark.prescore``,
``Benchmark.builder`` (``module:function``, normally the data module's ``publish_build``).

This module imports nothing of lmms-scene's and nothing heavy: the Protocols are types only.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class DataModule(Protocol):
    """A benchmark's data: schema, sample, load-time checks, card, local build, publish."""

    def features(self) -> Any:
        """The ``datasets.Features`` of one row (the released columns)."""

    def build_sample(self, folder: Path) -> list[Path]:
        """Write the embedded sample split under the task folder ``folder``; the files written."""

    def ensure_schema(self, dataset: Any) -> Any:
        """Check a loaded split before the model runs (the tasks' ``process_docs`` call it):
        a missing column or a repeated id is an error naming it; a bad row becomes a stand-in
        carrying its reason (:mod:`lmms_scene.data.recheck`), recorded unscored."""

    def loaded_row_problem(self, row: Mapping[str, Any], index: int) -> str | None:
        """Why the loaded row at ``index`` cannot be evaluated (naming the row, field and
        value), or None."""

    def card(self, dataset: Any, source: str, notes: Sequence[str] = ()) -> str:
        """The dataset card (``README.md``) of a built dataset from ``source``; ``notes``:
        build decisions to record."""

    def write_local(self, dataset: Any, out: Path, card: str, name: str | None = None) -> dict[str, Any]:
        """Write a built dataset, its ``card`` and the tasks that evaluate it under ``out``
        (:mod:`lmms_scene.data.local`); what was written, with the task names."""

    def publish_build(
        self, out: Path, *, folder: Path | None = None, hub: str | None = None, metadata: Path | None = None
    ) -> tuple[Path, str]:
        """``lmms-scene publish``: build from the sources into ``out``; (folder, a sentence
        naming the source). A source that does not apply is a ``ValueError`` naming it."""


@runtime_checkable
class ScoringModule(Protocol):
    """Where a benchmark's per-item scoring lives (``metrics/<bench>/scoring.py``)."""

    #: the fields that identify an item in a scored row
    ITEM_FIELDS: tuple[str, ...]
    #: the fields holding what the item asks and its gold answer (with ITEM_FIELDS: the data's fingerprint)
    DATA_FIELDS: tuple[str, ...]

    def unscored_row(self, doc: Mapping[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """A row recorded unscored with its reason (never a silent zero)."""


@runtime_checkable
class ResultsModule(Protocol):
    """What lmms-scene reads from a benchmark's results (``metrics/<bench>/tables.py``)."""

    #: the metric key whose value (in the results JSON) is the benchmark's report dict
    REPORT_KEY: str
    ITEM_FIELDS: tuple[str, ...]
    DATA_FIELDS: tuple[str, ...]
    #: the fields a submission's verification rows carry
    VERIFY_FIELDS: tuple[str, ...]
    #: the fields that identify one scored row (unique within a task)
    ROW_ID_FIELDS: tuple[str, ...]
    #: the fields (besides the item's) that tell one view of an item from another (may be empty)
    VIEW_FIELDS: tuple[str, ...]
    #: field -> type(s) a verification row's value must have
    ROW_TYPES: dict[str, Any]

    def identity(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The data's identity (fingerprint, counts) from the scored rows."""

    def report_of(self, result: Any) -> Mapping[str, Any] | None:
        """The benchmark's report dict in one task's results (None: none there)."""

    def summary(self, report: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The headline numbers of a report (metric name -> value)."""

    def failures(self, report: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(counts of what could not be scored, sentences naming them)."""

    def verification_rows(self, result: Any) -> list[dict[str, Any]]:
        """The scored rows of one task's results, as a submission carries them."""

    def recompute(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The headline numbers recomputed from scored rows (the leaderboard's check)."""

    def row_failures(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Counts of unscored rows by reason."""

    def expected_views(self, task: str, rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
        """The VIEW_FIELDS values every item of ``task`` must have a row for."""

    def rederive(
        self, rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None
    ) -> tuple[list[str], list[str]]:
        """(problems, notes): each row's scores recomputed from its output and gold."""

    def view(self, results: Sequence[Any], labels: Mapping[int, str]) -> Any:
        """The tables and figures (:class:`lmms_scene.report.tables.View`) ``show``,
        ``report`` and the HTML page render."""


@runtime_checkable
class PooledResultsModule(ResultsModule, Protocol):
    """A results module whose headline pools several tasks' rows (``Benchmark.pooled``)."""

    def group_summary(self, result: Any) -> Mapping[str, Any] | None:
        """The headline numbers a group's results state (None: ``result`` is not the group)."""


# -- checking a module against a Protocol ------------------------------------------------


def members(protocol: type) -> dict[str, Any]:
    """The Protocol's members: name -> its function, or the annotation of a data member."""
    out: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, Protocol) or not getattr(klass, "_is_protocol", False):
            continue
        for name, annotation in getattr(klass, "__annotations__", {}).items():
            out[name] = annotation
        for name, value in vars(klass).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                out[name] = value
    return out


def _accepts(declared: inspect.Signature, found: inspect.Signature) -> str | None:
    """Why a function with signature ``found`` cannot be called as ``declared`` says (None: it can)."""
    want = [p for p in declared.parameters.values() if p.name != "self"]
    have = list(found.parameters.values())
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in have)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in have)
    positional = [p for p in have if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in have}
    used: set[str] = set()
    k = 0
    for p in want:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if k < len(positional):
                q = positional[k]
                if p.kind is p.POSITIONAL_OR_KEYWORD and q.name != p.name and q.kind is not q.POSITIONAL_ONLY:
                    return f"parameter {k + 1} is {q.name!r}, the contract's is {p.name!r}"
                if p.default is not p.empty and q.default is q.empty:
                    return f"parameter {q.name!r} needs a default (the contract's {p.name!r} has one)"
                used.add(q.name)
                k += 1
            elif not var_pos:
                return f"takes {len(positional)} positional parameter(s); the contract passes {p.name!r} too"
        else:  # keyword-only in the contract
            q = by_name.get(p.name)
            if q is None and not var_kw:
                return f"has no keyword parameter {p.name!r}"
            if q is not None:
                if q.kind is q.POSITIONAL_ONLY:
                    return f"parameter {p.name!r} is positional-only; the contract passes it by keyword"
                if p.default is not p.empty and q.default is q.empty:
                    return f"parameter {q.name!r} needs a default (the contract's has one)"
                used.add(q.name)
    if any(p.kind is p.VAR_POSITIONAL for p in want):
        return None  # the contract passes more positional arguments: the benchmark's own
    extra = [
        q.name
        for q in have
        if q.name not in used and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD) and q.default is q.empty
    ]
    if extra:
        return f"parameter(s) {extra} have no default (the contract does not pass them)"
    return None


def problems(module: ModuleType | Any, protocol: type) -> list[str]:
    """Every way ``module`` falls short of ``protocol``: a missing member, a data member of
    the wrong type, a function the contract's calls would not fit. Empty: it conforms."""
    name = getattr(module, "__name__", repr(module))
    out = []
    for member, declared in members(protocol).items():
        if not hasattr(module, member):
            out.append(f"{name}: no {member!r} ({protocol.__name__})")
            continue
        value = getattr(module, member)
        if inspect.isfunction(declared):
            if not callable(value):
                out.append(f"{name}.{member}: {value!r} is not callable ({protocol.__name__})")
                continue
            why = _accepts(inspect.signature(declared), inspect.signature(value))
            if why:
                out.append(f"{name}.{member}{inspect.signature(value)}: {why} ({protocol.__name__})")
        else:
            kind = {"str": str, "tuple[str, ...]": tuple, "dict[str, Any]": dict}.get(str(declared))
            if kind is not None and not isinstance(value, kind):
                out.append(f"{name}.{member}: expected {declared}, got {type(value).__name__} ({protocol.__name__})")
            elif kind is tuple and not all(isinstance(v, str) for v in value):
                out.append(f"{name}.{member}: expected field names (strings), got {value!r} ({protocol.__name__})")
    return out
