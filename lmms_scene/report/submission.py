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

:func:`verify` is what the leaderboard runs on every file: the schema (``jsonschema``),
then everything a schema cannot say, with the direction and range of every metric from
the registry and never from the file: values finite and in range, inside their own
interval; the rows hash; the headline, its interval and the data fingerprint recomputed
from the rows; the failure counts recomputed from the rows; the harness version among
the tested ones; the data an official release. :func:`build` refuses (:class:`Refused`,
every reason listed) whatever :func:`verify` would refuse, and more: a ``--limit`` run,
a sample split, a run whose samples were not logged, results and samples that disagree,
more than one model.

What a check cannot catch: rows and numbers forged together consistently pass the
recomputation; only rescoring the outputs against the official data can catch them
(``lmms-scene rescore``). The fingerprint covers ids and gold fields, not images.
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

from lmms_scene.files import STRICT_HOOKS
from lmms_scene import benchmarks
from lmms_scene.provenance import run_versions
from lmms_scene.results import _resolve, data_files, file_sha256, load
from lmms_scene.validation import probability

FORMAT = "lmms-scene-submission"
SCHEMA_VERSION = 2
SCHEMA_FILE = "submission.schema.json"
#: more empty outputs than this share of a task's rows refuses the submission
MAX_EMPTY_RATE = 0.05
#: the lmms-eval releases whose results lmms-scene reads (pyproject's dependency range)
TESTED_HARNESS = (">=0.7.3", "<0.8")
#: how close a recomputed number must be to the one a file states
TOLERANCE = 1e-9


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
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")


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
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0, abs_tol=TOLERANCE)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- the sample-split and version rules ---------------------------------------------------


def sample_reason(result) -> str | None:
    """Why ``result`` is a sample split (None: it is not one)."""
    for bench in benchmarks.BENCHMARKS:
        if result.task in bench.sample_tasks:
            return f"{result.task}: a sample split ({bench.title}'s embedded sample), not the benchmark"
    metadata = result.config.get("metadata") if isinstance(result.config.get("metadata"), Mapping) else {}
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
        reasons.append(f"the results record lmms-eval {version!r}, not one of the tested releases {','.join(TESTED_HARNESS)} "
                       "(lmms-eval 0.7.3 run without lmms-scene records a git commit there; re-run with `lmms-scene eval`)")  # fmt: skip
        return None
    return version


def _official(bench, task: str, dataset: Mapping[str, Any], official: Mapping[str, Sequence[str]] | None) -> tuple[bool, str]:
    """Whether a task's data is the benchmark's official release, and why (not)."""
    fingerprint = dataset.get("fingerprint")
    known = {*((bench.release.fingerprints or {}).get(task, ()) or ()),
             *(fp for fps in (bench.release.fingerprints or {}).values() for fp in fps),
             *((official or {}).get(bench.name) or ())}  # fmt: skip
    if fingerprint and fingerprint in known:
        return True, "its fingerprint is a registered official release"
    if known:
        return False, f"its data (fingerprint {fingerprint}) is not an official {bench.title} release"
    if bench.release.hub is None:
        return False, f"{bench.title} has no public release lmms-scene knows of, so no run is the official benchmark yet"
    source = dataset.get("source") or {}
    if source.get("path") == bench.release.hub and not source.get("data_files"):
        return True, f"read from the official hub dataset {bench.release.hub} (no fingerprint registered yet; recorded)"
    return False, (f"its data is not the official release (read from {source.get('path') or 'local files'}"
                   f"{' ' + str([f['path'] for f in source.get('data_files') or []]) if source.get('data_files') else ''}; "
                   f"the official one is the hub dataset {bench.release.hub})")  # fmt: skip


# -- building -------------------------------------------------------------------------------


def _dataset(result, identity: Mapping[str, Any]) -> dict[str, Any]:
    cfg = result.config
    files = data_files(cfg)
    source: dict[str, Any] = {"path": None if cfg.get("dataset_path") is None else str(cfg.get("dataset_path")),
                              "split": cfg.get("test_split"), "revision": result.dataset.get("revision")}  # fmt: skip
    if files:
        source["data_files"] = [{"path": f, "sha256": file_sha256(_resolve(f, cfg))} for f in files]
    return {"fingerprint": identity.get("fingerprint"), "n_rows": identity.get("n_rows"), "source": source}


def _headline_task(bench, results: Sequence[Any]) -> Any:
    """The result whose rows the headline is computed from: the registry's first task the
    run has (a built task ``<task>_<name>`` ranks with ``<task>``)."""

    def rank(r) -> tuple[int, str]:
        best = None
        for i, name in enumerate(bench.tasks):
            if (r.task == name or r.task.startswith(name + "_")) and (best is None or len(name) > len(bench.tasks[best])):
                best = i
        return (len(bench.tasks) if best is None else best, r.task)

    return sorted(results, key=rank)[0]


def _benchmark_entry(bench, results: Sequence[Any], groups: Sequence[Any], max_empty_rate: float,
                     official: Mapping[str, Sequence[str]] | None, reasons: list[str]) -> dict[str, Any] | None:  # fmt: skip
    mod = bench.results()
    names = [m.name for m in bench.headline]
    entry: dict[str, Any] = {"headline": names[0], "metrics": {}, "tasks": {}, "provenance": {}, "rows": {}, "rows_sha256": {}}
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
                why.append(f"{counts['n_empty']} of {counts['n']} outputs are empty ({rate:.1%} > the {max_empty_rate:.1%} allowed)")
        judged = sum(1 for s in r.samples or [] if any(isinstance(v, Mapping) and v.get("judge_failures") for v in s.values()))
        if judged:
            why.append(f"{judged} rows record judge failures in the logged samples")
        reasons.extend(f"{r.task}: {w}" for w in why)
        rows = mod.verification_rows(r) if r.samples else []
        if not rows:
            reasons.append(f"{r.task}: no logged samples, so its numbers cannot be checked (run with --log_samples and give "
                           "the folder that holds the samples files)")  # fmt: skip
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
    pooled = bool(getattr(mod, "POOLED", False))
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
            reasons.append(f"{bench.name}: {name} is {stated[name]!r} in the results but {value!r} from the logged samples: "
                           "the results and their samples disagree")  # fmt: skip
        entry["metrics"][name] = {"value": float(value), "ci95": [float(ci[0]), float(ci[1])] if ci else None,
                                  "n": identity.get("n_rows")}  # fmt: skip
    if names[0] not in entry["metrics"]:
        reasons.append(f"{bench.name}: the headline metric {names[0]} was not computed, so it cannot be ranked "
                       f"(the provenance says why, e.g. CLIP switched off)")  # fmt: skip
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


def build(paths: str | Path | Iterable[str | Path], *, max_empty_rate: float = MAX_EMPTY_RATE,
          official: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:  # fmt: skip
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
        reasons.append("results of more than one model (one submission is one model): "
                       + "; ".join(f"{m} {a!r}" for m, a in models))  # fmt: skip
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
            entry = _benchmark_entry(bench, mine, [g for g in groups if g.benchmark == bench.name], max_empty_rate, official, reasons)
            if entry is not None:
                out_benchmarks[bench.name] = entry
    if reasons:
        raise Refused(reasons)
    name, model_args = models[0]
    submission = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": {"name": ours[0].label, "model": name, "model_args": model_args},
        "versions": versions,
        "benchmarks": out_benchmarks,
        "sources": sorted({str(r.source) for r in ours}),
    }
    problems = verify(submission, official=official, max_empty_rate=max_empty_rate)
    if problems:  # a bug here, not the user's input: say so
        raise RuntimeError("lmms-scene built a submission its own check refuses (please report): " + "; ".join(problems))
    return submission


# -- checking --------------------------------------------------------------------------------


def verify(submission: Any, *, official: Mapping[str, Sequence[str]] | None = None, max_empty_rate: float = MAX_EMPTY_RATE) -> list[str]:
    """Every reason ``submission`` cannot be ranked (empty: it can); see the module docstring."""
    errors = validate(submission)
    if errors:
        return errors
    if not tested_harness(submission["versions"]["lmms_eval"]):
        errors.append(f"$.versions.lmms_eval: {submission['versions']['lmms_eval']!r} is not a tested lmms-eval release "
                      f"({','.join(TESTED_HARNESS)})")  # fmt: skip
    for name, entry in submission["benchmarks"].items():
        where = f"$.benchmarks.{name}"
        try:
            bench = benchmarks.get(name)
        except KeyError:
            errors.append(f"{where}: {name!r} is not an lmms-scene benchmark ({', '.join(benchmarks.names())})")
            continue
        errors += _verify_entry(bench, entry, where, official, max_empty_rate)
    return errors


def _verify_entry(bench, entry: Mapping[str, Any], where: str, official: Mapping[str, Sequence[str]] | None,
                  max_empty_rate: float) -> list[str]:  # fmt: skip
    errors: list[str] = []
    mod = bench.results()
    specs = {m.name: m for m in bench.headline}
    if entry["headline"] != bench.headline[0].name:
        errors.append(f"{where}.headline: {entry['headline']!r}; {bench.title}'s headline is {bench.headline[0].name!r}")
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
    # the rows: intact, and the numbers and the data follow from them
    payloads = entry["rows"]
    for task, payload in payloads.items():
        if list(payload.get("fields") or []) != list(mod.VERIFY_FIELDS):
            errors.append(f"{where}.rows.{task}.fields: expected {list(mod.VERIFY_FIELDS)}")
        elif entry["rows_sha256"].get(task) != rows_sha256(payload):
            errors.append(f"{where}.rows.{task}: its sha256 is not {entry['rows_sha256'].get(task)!r}: the rows were changed")
    if errors:
        return errors
    rows_by_task = {t: payload_rows(p) for t, p in payloads.items()}
    pooled = bool(getattr(mod, "POOLED", False))
    head_rows = [r for rows in rows_by_task.values() for r in rows] if pooled else rows_by_task.get(entry["task"], [])
    if not head_rows:
        return [f"{where}: no rows for its headline task {entry['task']!r}: unverifiable"]
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
            errors.append(f"{where}.metrics.{key}.n: {m.get('n')!r}, but its rows hold {again['dataset']['n_rows']} items")
    if entry["dataset"]["fingerprint"] != again["dataset"]["fingerprint"]:
        errors.append(f"{where}.dataset.fingerprint: {entry['dataset']['fingerprint']!r} is not the fingerprint of its rows "
                      f"({again['dataset']['fingerprint']!r})")  # fmt: skip
    # the data the rows are, not the data the file says it is
    is_official, why = _official(bench, entry["task"], {**entry["dataset"], "fingerprint": again["dataset"]["fingerprint"]}, official)
    if not is_official:
        errors.append(f"{where}.dataset: not the benchmark: {why}")
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


def read(path: str | Path, *, official: Mapping[str, Sequence[str]] | None = None,
         max_empty_rate: float = MAX_EMPTY_RATE) -> tuple[dict[str, Any] | None, list[str]]:  # fmt: skip
    """A submission file and every reason it cannot be ranked (the JSON is None when it
    cannot be parsed). ``NaN`` and ``Infinity`` are not JSON and are refused as such."""
    path = Path(path)

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constants, **STRICT_HOOKS)  # repeated keys, absurd numbers
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot be read ({exc})"]
    except json.JSONDecodeError as exc:
        return None, [f"not JSON (line {exc.lineno}: {exc.msg})"]
    except ValueError as exc:
        return None, [f"not JSON ({exc})"]
    if isinstance(data, dict) and data.get("format") == FORMAT and data.get("schema_version") != SCHEMA_VERSION:
        return data, [f"schema_version {data.get('schema_version')!r}: this lmms-scene reads version {SCHEMA_VERSION}"]
    return data, verify(data, official=official, max_empty_rate=max_empty_rate)
