"""Leaderboard submissions: one model's lmms-eval results as a documented, versioned JSON
file that carries what is needed to check it.

:func:`build` reads results folders (:func:`lmms_scene.results.load`, with their samples
files) and returns a submission following ``submission.schema.json`` (shipped beside
this module and published in docs/submission.schema.json; schema version
:data:`SCHEMA_VERSION`). Per benchmark it holds the headline metrics the registry
declares (:attr:`lmms_scene.benchmarks.Benchmark.headline`) with their 95% intervals,
the data they were computed on (its fingerprint, source and whether it is the official
release), what computed them, the failure counts, and the per-row fields the headline
follows from (:func:`rows_payload`) with their sha256. The numbers are recomputed from
those rows with the benchmark's own function and must equal what the results file
holds.

:func:`verify` (:func:`check`, with what it found) is what the leaderboard runs on every
file (:func:`read_checked` reads it first with :func:`load_file`: regular files only, size,
depth and digit limits): the schema (``jsonschema``), then everything a schema cannot say,
with the direction and range of every metric from the registry and never from the file:
values finite and in range, inside their own interval; the rows hash; the data a
fingerprint the registry or the operator (``--official``) vouches for, never what the
file says of its source; every row of its type, once, with its item's gold, every item
under every view its task scores (missing rows are failures); each row's scores
recomputed from its output (the results module's ``rederive``); the headline, its interval
and the data fingerprint recomputed from the rows; the failure counts recomputed from the
rows; the harness version among the tested ones. :func:`build` refuses (:class:`Refused`,
every reason listed) whatever :func:`verify` would refuse, and more: a ``--limit`` run, a
sample split, a run whose samples were not logged, results and samples that disagree,
more than one model.

What a check cannot catch: CLIP-S needs the images, which a submission does not carry
(RefCLIPScore is checked for consistency with its parts only), and an output cannot be told
from one a person wrote. The fingerprint covers ids and gold fields, not images.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from lmms_scene import benchmarks
from lmms_scene.provenance import run_versions
from lmms_scene.report.submission_file import load_file
from lmms_scene.report.tables import row_label
from lmms_scene.results import _resolve, data_files, file_sha256, load
from lmms_scene.validation import probability

FORMAT = "lmms-scene-submission"
SCHEMA_VERSION = 3
SCHEMA_FILE = "submission.schema.json"
#: more empty outputs than this share of a task's rows refuses the submission
MAX_EMPTY_RATE = 0.05
#: the lmms-eval releases whose results lmms-scene reads (pyproject's dependency range)
TESTED_HARNESS = (">=0.7.3", "<0.8")
#: how close a recomputed number must be to the one a file states
TOLERANCE = 1e-9
#: how many rows a refusal names before it counts the rest
LISTED = 5


class Refused(ValueError):
    """A submission cannot be built; ``reasons`` lists every reason."""

    def __init__(self, reasons: Sequence[str]):
        self.reasons = list(reasons)
        super().__init__("refused to build a submission:\n" + "\n".join(f"  - {r}" for r in self.reasons))


# -- the schema ---------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    """The submission JSON Schema (``lmms_scene/report/submission.schema.json``)."""
    return json.loads(resources.files("lmms_scene.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def validate(instance: Any) -> list[str]:
    """Every way ``instance`` breaks the schema, as ``"$.path: message"`` (empty: valid)."""
    import jsonschema  # deferred: jsonschema is heavy to import

    validator = jsonschema.Draft202012Validator(schema())
    out = []
    for err in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        out.append(f"{path}: {err.message}")
    return out


def tested_harness(version: Any) -> bool:
    """Whether an lmms-eval version string is one of :data:`TESTED_HARNESS`."""
    try:
        return Version(str(version).split("+", 1)[0]) in SpecifierSet(",".join(TESTED_HARNESS))
    except InvalidVersion:
        return False


# -- rows ---------------------------------------------------------------------------------


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8", "surrogatepass"
    )


def rows_payload(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, Any]:
    """Rows as compact columns: ``{"fields": [...], "values": [[...], ...]}`` (NaN and
    infinities become null: a row's missing value, never a number)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return {"fields": list(fields), "values": [[clean(r.get(f)) for f in fields] for r in rows]}


def payload_rows(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    fields = list(payload.get("fields") or [])
    return [dict(zip(fields, values)) for values in payload.get("values") or []]


def rows_sha256(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(payload)).hexdigest()


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0, abs_tol=TOLERANCE)
    )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def row_type_problem(value: Any, kind: Any) -> str | None:
    """Why ``value`` is not of a row field's ``kind`` (None: it is). Kinds: ``"str"``,
    ``"str[]"``, ``"int"``, ``"num"``, ``"num?"`` (a finite number or null), ``"01?"``
    (0, 1 or null), ``"bool"``, ``"bool?"``, a tuple of the allowed values, or a predicate.
    A bool is not a number and a string is not a score."""
    if callable(kind) and not isinstance(kind, (str, tuple)):
        return None if kind(value) else f"{value!r:.80} is not one of the allowed values"
    if isinstance(kind, tuple):
        return None if isinstance(value, str) and value in kind else f"{value!r:.80} is not one of {list(kind)}"
    nullable = kind.endswith("?")
    if value is None:
        return None if nullable else "null where a value is required"
    base = kind.rstrip("?")
    ok = {
        "str": isinstance(value, str),
        "str[]": isinstance(value, list) and all(isinstance(x, str) for x in value),
        "int": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "num": _number(value),
        "01": _number(value) and value in (0, 1),
        "bool": isinstance(value, bool),
    }[base]
    return (
        None if ok else f"{value!r:.80} is not {'a ' if base != 'int' else 'an '}{base.replace('01', '0-or-1 score')}"
    )


def _listed(problems: Sequence[str], what: str) -> list[str]:
    if len(problems) <= LISTED:
        return list(problems)
    return [*problems[:LISTED], f"... and {len(problems) - LISTED} more {what}"]


def check_rows(
    bench, task: str, rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None, where: str
) -> tuple[list[str], list[str], int]:
    """(problems, notes, n_missing) of a task's (or, pooled, a run's) rows, checked against
    the data and against their own outputs: every field of its type; every row id once
    (duplicates refused by id); every item under every view the task scores (missing rows
    counted); every row of an item with the item's gold fields; every score recomputed from
    the row's output (:func:`rederive` of the benchmark's results module)."""
    mod = bench.results()
    types = mod.ROW_TYPES
    bad = [
        f"{where}: {row_label(r, mod.ROW_ID_FIELDS)}: {f}: {why}"
        for r in rows
        for f, kind in types.items()
        if (why := row_type_problem(r.get(f), kind))
    ]
    if bad:
        return _listed(bad, "ill-typed fields"), [], 0
    problems: list[str] = []
    seen: dict[tuple, Mapping[str, Any]] = {}
    dupes: list[str] = []
    items: dict[tuple, Mapping[str, Any]] = {}
    views: dict[tuple, set] = {}
    gold: list[str] = []
    for r in rows:
        key = tuple(r.get(f) for f in mod.ROW_ID_FIELDS)
        if key in seen:
            dupes.append(f"{where}: {row_label(r, mod.ROW_ID_FIELDS)} appears more than once (duplicates are refused)")
            continue
        seen[key] = r
        item = tuple(r.get(f) for f in mod.ITEM_FIELDS)
        first = items.setdefault(item, r)
        views.setdefault(item, set()).add(tuple(r.get(f) for f in mod.VIEW_FIELDS))
        for f in mod.DATA_FIELDS:
            if r.get(f) != first.get(f):
                gold.append(
                    f"{where}: {row_label(r, mod.ROW_ID_FIELDS)}: {f} {str(r.get(f))[:80]!r} is not its item's "
                    f"{str(first.get(f))[:80]!r}"
                )
    problems += _listed(dupes, "duplicated rows") + _listed(gold, "rows whose gold differs from their item's")
    expected = mod.expected_views(task, rows)
    strays = [
        f"{where}: {row_label(r, mod.ROW_ID_FIELDS)} is not a view the task scores"
        for r in seen.values()
        if tuple(r.get(f) for f in mod.VIEW_FIELDS) not in expected
    ]
    problems += _listed(strays, "stray rows")
    n_official = len(items) * len(expected)
    n_missing = sum(len(expected - v) for v in views.values())
    if n_missing:
        problems.append(
            f"{where}: {n_missing} of the {n_official} rows its data has are missing (counted as failures): unrankable"
        )
    if problems:
        return problems, [], n_missing
    try:
        wrong, notes = mod.rederive(list(seen.values()), provenance)
    except Exception as exc:  # noqa: BLE001 - a forged row must not crash the leaderboard
        return [f"{where}: its rows cannot be scored again ({type(exc).__name__}: {exc})"], [], 0
    if wrong:
        problems.append(f"{where}: {len(wrong)} rows state scores their outputs do not give")
        problems += _listed([f"{where}: {w}" for w in wrong], "rows")
    return problems, notes, 0


# -- the sample-split and version rules ---------------------------------------------------


def sample_reason(result) -> str | None:
    """Why ``result`` is a sample split (None: it is not one)."""
    for bench in benchmarks.BENCHMARKS:
        if result.task in bench.sample_tasks:
            return f"{result.task}: a sample split ({bench.title}'s embedded sample), not the benchmark"
    metadata = result.config.get("metadata") if isinstance(result.config.get("metadata"), Mapping) else {}
    if metadata.get("generated"):
        return f"{result.task}: {metadata['generated']} (metadata.generated), not the benchmark"
    if metadata.get("sample"):
        return f"{result.task}: its config marks the dataset as a sample (metadata.sample: {metadata['sample']!r})"
    for path in data_files(result.config):
        if "sample" in Path(path).parts[:-1]:
            return f"{result.task}: reads a sample data file ({path})"
    return None


def _run_info(source: Path) -> dict[str, Any]:
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _harness_of(results: Sequence[Any], reasons: list[str]) -> str | None:
    """The one lmms-eval version the results files record (reasons when not tested)."""
    recorded = sorted({str(_run_info(r.source).get("lmms_eval_version")) for r in results})
    if len(recorded) > 1:
        reasons.append(f"the results come from several lmms-eval versions: {', '.join(recorded)}")
        return None
    version = recorded[0] if recorded else "None"
    if not tested_harness(version):
        reasons.append(
            f"the results record lmms-eval {version!r}, not one of the tested releases {','.join(TESTED_HARNESS)} "
            "(lmms-eval 0.7.3 run without lmms-scene records a git commit there; re-run with `lmms-scene eval`)"
        )
        return None
    return version


def vouched(bench, official: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """fingerprint -> who vouches for it: the registry (:attr:`Benchmark.release`) or the
    operator (``--official``). Nothing a submission says about its data is among them."""
    out = {fp: "registry" for fps in (bench.release.fingerprints or {}).values() for fp in fps}
    for fp in (official or {}).get(bench.name) or ():
        out.setdefault(str(fp), "--official")
    return out


def official_hint(bench, fingerprint: Any) -> str:
    """The exact ``--official`` file that would vouch for ``fingerprint``."""
    return json.dumps({bench.name: [fingerprint]})


def _official(
    bench, task: str, dataset: Mapping[str, Any], official: Mapping[str, Sequence[str]] | None
) -> tuple[bool, str]:
    """Whether a task's data is one the registry or the operator vouches for, and why (not).
    Where the data says it came from (a hub name, a path) is the submitter's claim and
    vouches for nothing: only the fingerprint of its rows counts."""
    fingerprint = dataset.get("fingerprint")
    known = vouched(bench, official)
    if fingerprint and fingerprint in known:
        who = "lmms-scene's registry" if known[fingerprint] == "registry" else "this leaderboard's --official list"
        return True, f"its fingerprint is vouched for by {who}"
    claim = (dataset.get("source") or {}).get("path")
    claimed = f"; it says it read {claim!r}, which is not checked" if claim else ""
    where = (
        "neither lmms-scene's registry nor --official lists it"
        if known or bench.release.hub is None
        else f"lmms-scene's registry has no fingerprint of {bench.release.hub} yet and --official does not list it"
    )
    return False, (
        f"its data (fingerprint {fingerprint}, {dataset.get('n_rows')} items) is not vouched for: {where}{claimed}. "
        f"If you know this is {bench.title}'s data, vouch for it with --official FILE, FILE holding "
        f"{official_hint(bench, fingerprint)}"
    )


# -- building -------------------------------------------------------------------------------


def _dataset(result, identity: Mapping[str, Any]) -> dict[str, Any]:
    cfg = result.config
    files = data_files(cfg)
    source: dict[str, Any] = {
        "path": None if cfg.get("dataset_path") is None else str(cfg.get("dataset_path")),
        "split": cfg.get("test_split"),
        "revision": result.dataset.get("revision"),
    }
    if files:
        source["data_files"] = [{"path": f, "sha256": file_sha256(_resolve(f, cfg))} for f in files]
    return {"fingerprint": identity.get("fingerprint"), "n_rows": identity.get("n_rows"), "source": source}


def _headline_task(bench, results: Sequence[Any]) -> Any:
    """The result whose rows the headline is computed from: the registry's first task the
    run has (a built task ``<task>_<name>`` ranks with ``<task>``)."""

    def rank(r) -> tuple[int, str]:
        best = None
        for i, name in enumerate(bench.tasks):
            if (r.task == name or r.task.startswith(name + "_")) and (
                best is None or len(name) > len(bench.tasks[best])
            ):
                best = i
        return (len(bench.tasks) if best is None else best, r.task)

    return sorted(results, key=rank)[0]


def _benchmark_entry(
    bench,
    results: Sequence[Any],
    groups: Sequence[Any],
    max_empty_rate: float,
    official: Mapping[str, Sequence[str]] | None,
    reasons: list[str],
) -> dict[str, Any] | None:
    mod = bench.results()
    names = [m.name for m in bench.headline]
    entry: dict[str, Any] = {
        "headline": names[0],
        "metrics": {},
        "tasks": {},
        "provenance": {},
        "rows": {},
        "rows_sha256": {},
    }
    payloads: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        report = mod.report_of(r)
        if report is None:
            reasons.append(f"{r.task}: no {bench.report_key} in its results (was it run with lmms-scene's task YAML?)")
            continue
        info = _run_info(r.source)
        n_samples = (info.get("n-samples") or {}).get(r.task) or {}
        counts, why = mod.failures(report)
        if isinstance(counts.get("n"), int) and isinstance(counts.get("n_empty"), int) and counts["n"]:
            rate = counts["n_empty"] / counts["n"]
            counts.update(empty_output_rate=rate, max_empty_rate=max_empty_rate)
            if rate > max_empty_rate:
                why.append(
                    f"{counts['n_empty']} of {counts['n']} outputs are empty ({rate:.1%} > the {max_empty_rate:.1%} allowed)"
                )
        judged = sum(
            1 for s in r.samples or [] if any(isinstance(v, Mapping) and v.get("judge_failures") for v in s.values())
        )
        if judged:
            why.append(f"{judged} rows record judge failures in the logged samples")
        reasons.extend(f"{r.task}: {w}" for w in why)
        rows = mod.verification_rows(r) if r.samples else []
        if not rows:
            reasons.append(
                f"{r.task}: no logged samples, so its numbers cannot be checked (run with --log_samples and give "
                "the folder that holds the samples files)"
            )
        payloads[r.task] = rows
        entry["tasks"][r.task] = {
            "version": (info.get("versions") or {}).get(r.task, (r.config.get("metadata") or {}).get("version")),
            "n_samples": n_samples.get("effective") if isinstance(n_samples.get("effective"), int) else None,
            "task_hash": (info.get("task_hashes") or {}).get(r.task),
            "failures": {k: v for k, v in counts.items() if _finite(v)},
        }
        prov = report.get("scorer") or (report.get("model") or {}).get("provenance")
        entry["provenance"][r.task] = dict(prov) if isinstance(prov, Mapping) else {}
        if not entry["provenance"][r.task]:
            reasons.append(f"{r.task}: its {bench.report_key} does not say what computed it (no provenance record)")
    if not payloads or not all(payloads.values()):
        return None
    pooled = bench.pooled  # declared in the registry (lmms_scene.contract.PooledResultsModule)
    head = _headline_task(bench, results)
    head_rows = [row for rows in payloads.values() for row in rows] if pooled else payloads[head.task]
    again = mod.recompute(head_rows)
    cell, identity = again["cell"], again["dataset"]
    # what the results file states for the same numbers: the headline task's report, or
    # (a per-schedule run) its group's
    stated = mod.summary(mod.report_of(head)) or {}
    if pooled and not all(stated.get(n) is not None for n in names[:-1]):
        group = next((g for g in groups if mod.group_summary(g)), None)
        stated = dict(mod.group_summary(group)) if group is not None else {}
        entry["task"] = group.task if group is not None else head.task
    else:
        entry["task"] = head.task
    for name in names:
        value = cell.get(name)
        if value is None:
            continue
        ci = (cell.get("ci95") or {}).get(name)
        if stated.get(name) is not None and not _close(float(stated[name]), float(value)):
            reasons.append(
                f"{bench.name}: {name} is {stated[name]!r} in the results but {value!r} from the logged samples: "
                "the results and their samples disagree"
            )
        entry["metrics"][name] = {
            "value": float(value),
            "ci95": [float(ci[0]), float(ci[1])] if ci else None,
            "n": identity.get("n_rows"),
        }
    if names[0] not in entry["metrics"]:
        reasons.append(
            f"{bench.name}: the headline metric {names[0]} was not computed, so it cannot be ranked "
            f"(the provenance says why, e.g. CLIP switched off)"
        )
    for task, rows in payloads.items():
        payload = rows_payload(rows, mod.VERIFY_FIELDS)
        entry["rows"][task] = payload
        entry["rows_sha256"][task] = rows_sha256(payload)
    entry["dataset"] = _dataset(head, identity)
    is_official, why = _official(bench, entry["task"], entry["dataset"], official)
    entry["dataset"]["official"] = is_official
    entry["dataset"]["official_note"] = why
    if not is_official:
        reasons.append(f"{bench.name}: not the benchmark: {why} (it can still be reported with `lmms-scene report`)")
    return entry


def build(
    paths: str | Path | Iterable[str | Path],
    *,
    max_empty_rate: float = MAX_EMPTY_RATE,
    official: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The submission for the results under ``paths``; raises :class:`Refused` listing why
    not. ``official``: more official fingerprints per benchmark (a leaderboard's own list)."""
    probability(max_empty_rate, "max_empty_rate")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    loaded = load(paths)
    reasons: list[str] = [f"skipped {p}: {why}" for p, why in loaded.skipped]
    known = set(benchmarks.names())
    ours = [r for r in loaded.results if r.benchmark in known and r.metrics and not r.config.get("group")]
    groups = [r for r in loaded.results if r.benchmark in known and r.config.get("group")]
    if not ours:
        raise Refused(reasons + [f"no lmms-scene task results in {', '.join(map(str, paths))}"])
    models = sorted({(r.model, r.model_args) for r in ours})
    if len(models) > 1:
        reasons.append(
            "results of more than one model (one submission is one model): "
            + "; ".join(f"{m} {a!r}" for m, a in models)
        )
    seen: dict[str, Path] = {}
    for r in ours:
        if r.task in seen:
            reasons.append(f"{r.task}: two results ({seen[r.task]} and {r.source}); give one run per task")
        seen.setdefault(r.task, r.source)
        if r.limit is not None:
            reasons.append(f"{r.task}: the run used --limit {r.limit} (a submission needs every doc)")
        why = sample_reason(r)
        if why:
            reasons.append(why)
    harness = _harness_of(ours, reasons)
    versions = {**run_versions(), "lmms_eval": harness, "lmms_eval_installed": run_versions()["lmms_eval"]}
    out_benchmarks: dict[str, Any] = {}
    for bench in benchmarks.BENCHMARKS:
        mine = [r for r in ours if r.benchmark == bench.name]
        if mine:
            entry = _benchmark_entry(
                bench, mine, [g for g in groups if g.benchmark == bench.name], max_empty_rate, official, reasons
            )
            if entry is not None:
                out_benchmarks[bench.name] = entry
    if reasons:
        raise Refused(reasons)
    name, model_args = models[0]
    submission = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "model": {"name": ours[0].label, "model": name, "model_args": model_args},
        "versions": versions,
        "benchmarks": out_benchmarks,
        "sources": sorted({str(r.source) for r in ours}),
    }
    problems = verify(submission, official=official, max_empty_rate=max_empty_rate)
    if problems:  # a bug here, not the user's input: say so
        raise RuntimeError(
            "lmms-scene built a submission its own check refuses (please report): " + "; ".join(problems)
        )
    return submission


# -- checking --------------------------------------------------------------------------------


def verify(
    submission: Any, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float = MAX_EMPTY_RATE
) -> list[str]:
    """Every reason ``submission`` cannot be ranked (empty: it can); see the module docstring."""
    return check(submission, official=official, max_empty_rate=max_empty_rate)[0]


def check(
    submission: Any, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float = MAX_EMPTY_RATE
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(problems, findings): :func:`verify`'s reasons, and per benchmark what the check
    found itself (``vouched_by``, ``fingerprint``, ``rederived``: what was recomputed from
    the outputs and what could not be), which the leaderboard shows instead of anything
    the file says about itself."""
    errors = validate(submission)
    if errors:
        return errors, {}
    findings: dict[str, dict[str, Any]] = {}
    if not tested_harness(submission["versions"]["lmms_eval"]):
        errors.append(
            f"$.versions.lmms_eval: {submission['versions']['lmms_eval']!r} is not a tested lmms-eval release "
            f"({','.join(TESTED_HARNESS)})"
        )
    for name, entry in submission["benchmarks"].items():
        where = f"$.benchmarks.{name}"
        try:
            bench = benchmarks.get(name)
        except KeyError:
            errors.append(f"{where}: {name!r} is not an lmms-scene benchmark ({', '.join(benchmarks.names())})")
            continue
        found: dict[str, Any] = {}
        try:
            errors += _verify_entry(bench, entry, where, official, max_empty_rate, found)
        except Exception as exc:  # noqa: BLE001 - one hostile file costs its row, never the board
            errors.append(f"{where}: cannot be checked ({type(exc).__name__}: {str(exc)[:200]})")
        findings[name] = found
    return errors, findings


def _verify_entry(
    bench,
    entry: Mapping[str, Any],
    where: str,
    official: Mapping[str, Sequence[str]] | None,
    max_empty_rate: float,
    found: dict[str, Any],
) -> list[str]:
    errors: list[str] = []
    mod = bench.results()
    specs = {m.name: m for m in bench.headline}
    if entry["headline"] != bench.headline[0].name:
        errors.append(
            f"{where}.headline: {entry['headline']!r}; {bench.title}'s headline is {bench.headline[0].name!r}"
        )
    for key, m in entry["metrics"].items():
        spec = specs.get(key)
        if spec is None:
            errors.append(f"{where}.metrics.{key}: not one of {bench.title}'s headline metrics {sorted(specs)}")
            continue
        problem = spec.problem(m["value"])
        if problem:
            errors.append(f"{where}.metrics.{problem}")
            continue
        ci = m.get("ci95")
        if ci is not None:
            bad = [spec.problem(x) for x in ci if spec.problem(x)]
            if bad or not ci[0] <= ci[1]:
                errors.append(f"{where}.metrics.{key}.ci95: {ci!r} is not an interval of {key}")
            elif not ci[0] - TOLERANCE <= m["value"] <= ci[1] + TOLERANCE:
                errors.append(f"{where}.metrics.{key}: {m['value']!r} lies outside its own interval {ci!r}")
    if entry["headline"] not in entry["metrics"]:
        errors.append(f"{where}: its headline {entry['headline']!r} has no value")
    if bench.ranking_metric.name not in entry["metrics"]:
        errors.append(f"{where}: the metric {bench.title} is ranked by, {bench.ranking_metric.name!r}, has no value")
    # the rows: intact, and the numbers and the data follow from them
    payloads = entry["rows"]
    for task, payload in payloads.items():
        if list(payload.get("fields") or []) != list(mod.VERIFY_FIELDS):
            errors.append(f"{where}.rows.{task}.fields: expected {list(mod.VERIFY_FIELDS)}")
        elif any(len(v) != len(mod.VERIFY_FIELDS) for v in payload["values"]):
            errors.append(f"{where}.rows.{task}.values: every row needs {len(mod.VERIFY_FIELDS)} values")
        elif entry["rows_sha256"].get(task) != rows_sha256(payload):
            errors.append(
                f"{where}.rows.{task}: its sha256 is not {entry['rows_sha256'].get(task)!r}: the rows were changed"
            )
    if errors:
        return errors
    rows_by_task = {t: payload_rows(p) for t, p in payloads.items()}
    pooled = bench.pooled  # declared in the registry (lmms_scene.contract.PooledResultsModule)
    head_rows = [r for rows in rows_by_task.values() for r in rows] if pooled else rows_by_task.get(entry["task"], [])
    if not head_rows:
        return [f"{where}: no rows for its headline task {entry['task']!r}: unverifiable"]
    # the data the rows are, not the data the file says it is: vouched for by the registry
    # or the operator, every row once, every view of every item, gold as the item's
    try:
        identity = mod.identity(head_rows)
    except Exception as exc:  # noqa: BLE001 - a forged row must not crash the leaderboard
        return [f"{where}.rows: no data fingerprint can be computed from them ({type(exc).__name__}: {exc})"]
    found["fingerprint"] = identity["fingerprint"]
    found["n_items"] = identity["n_rows"]
    found["claimed_source"] = (entry["dataset"].get("source") or {}).get("path")
    is_official, why = _official(
        bench,
        entry["task"],
        {**entry["dataset"], "fingerprint": identity["fingerprint"], "n_rows": identity["n_rows"]},
        official,
    )
    found["vouched_by"] = vouched(bench, official).get(identity["fingerprint"]) if is_official else None
    if not is_official:
        found["official_hint"] = official_hint(bench, identity["fingerprint"])
        errors.append(f"{where}.dataset: not the benchmark: {why}")
    units = [(entry["task"], head_rows)] if pooled else list(rows_by_task.items())
    rederived: list[str] = []
    for task, rows in units:
        prov = entry["provenance"].get(task) or next(iter(entry["provenance"].values()), None)
        problems, notes, _ = check_rows(
            bench, task, rows, prov if isinstance(prov, Mapping) else None, f"{where}.rows.{task}"
        )
        errors += problems
        rederived += [n for n in notes if n not in rederived]
    found["rederived"] = rederived
    if errors:
        return errors
    try:
        again = mod.recompute(head_rows)
    except Exception as exc:  # noqa: BLE001 - a forged row must not crash the leaderboard
        return [f"{where}.rows: the headline cannot be recomputed from them ({type(exc).__name__}: {exc})"]
    for key, m in entry["metrics"].items():
        value = again["cell"].get(key)
        ci = (again["cell"].get("ci95") or {}).get(key)
        if value is None or not _close(m["value"], value):
            errors.append(f"{where}.metrics.{key}: {m['value']!r} does not follow from its rows ({value!r})")
        elif not _close(m.get("ci95"), list(ci) if ci else None):
            errors.append(f"{where}.metrics.{key}.ci95: {m.get('ci95')!r} does not follow from its rows ({ci!r})")
        if m.get("n") != again["dataset"]["n_rows"]:
            errors.append(
                f"{where}.metrics.{key}.n: {m.get('n')!r}, but its rows hold {again['dataset']['n_rows']} items"
            )
    if entry["dataset"]["fingerprint"] != again["dataset"]["fingerprint"]:
        errors.append(
            f"{where}.dataset.fingerprint: {entry['dataset']['fingerprint']!r} is not the fingerprint of its rows "
            f"({again['dataset']['fingerprint']!r})"
        )
    for task, rows in rows_by_task.items():
        counts = mod.row_failures(rows)
        for key, n in counts.items():
            if n and not (key == "n_empty" and n / max(1, len(rows)) <= max_empty_rate):
                errors.append(f"{where}.rows.{task}: {n} rows {key.removeprefix('n_').replace('_', ' ')}: unrankable")
    return errors


def write(submission: Mapping[str, Any], out: str | Path) -> Path:
    """Write a submission (schema-checked first) as indented JSON. ``out`` must be a file name."""
    errors = validate(submission)
    if errors:
        raise ValueError("not a valid submission: " + "; ".join(errors))
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out: {out} is a folder; give the submission's file name (e.g. {out / 'submission.json'})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(submission, indent=1, sort_keys=False, allow_nan=False) + "\n", encoding="utf-8")
    return out


def read(
    path: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float = MAX_EMPTY_RATE
) -> tuple[dict[str, Any] | None, list[str]]:
    """A submission file and every reason it cannot be ranked (the JSON is None when it
    cannot be parsed). ``NaN`` and ``Infinity`` are not JSON and are refused as such."""
    data, problems, _ = read_checked(path, official=official, max_empty_rate=max_empty_rate)
    return data, problems


def read_checked(
    path: str | Path, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float = MAX_EMPTY_RATE
) -> tuple[Any, list[str], dict[str, dict[str, Any]]]:
    """:func:`read` with :func:`check`'s findings."""
    data, problems = load_file(path)
    if problems:
        return None, problems, {}
    if isinstance(data, dict) and data.get("format") == FORMAT and data.get("schema_version") != SCHEMA_VERSION:
        return (
            data,
            [
                f"schema_version {str(data.get('schema_version'))[:40]!r}: this lmms-scene reads version {SCHEMA_VERSION}"
            ],
            {},
        )
    problems, findings = check(data, official=official, max_empty_rate=max_empty_rate)
    return data, problems, findings
