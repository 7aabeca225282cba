"""Leaderboard submissions: one model's lmms-eval results as a documented, versioned JSON file.

:func:`build` reads results folders (:func:`lmms_scene.results.load`) and returns a
submission following ``submission.schema.json`` (shipped beside this module, schema
version :data:`SCHEMA_VERSION`): the model and its arguments, the lmms-scene and
lmms-eval versions, each task's version, sample count and dataset revision (``None``
with a note when the results do not record one), per benchmark the headline metrics
with their 95% bootstrap intervals (read from the breakdowns the tasks wrote, never
recomputed), the provenance record of what computed them, and the failure counts.

It refuses (:class:`Refused`, listing every reason) to build a submission that a
leaderboard could not trust:

- a run with ``--limit`` (not every doc was evaluated);
- a sample split: a benchmark's ``sample_tasks``, a task whose config says
  ``metadata.sample: true``, or one whose data files lie in a ``sample`` folder;
- unreported failures: empty outputs above ``max_empty_rate`` (default
  :data:`MAX_EMPTY_RATE`), rows that could not be scored, failed conversations, judge
  failures (failed calls or no consensus);
- no lmms-scene task, a task without its report, more than one model, or the same task twice;
- a headline metric that was not computed (e.g. COOCO with CLIP switched off).

:func:`validate` checks any JSON value against the schema with a small validator (the
subset of JSON Schema the schema file uses; ``jsonschema`` is not a dependency), and
:func:`check` adds the rules a schema cannot say (the headline is one of the metrics,
every metric's task is listed).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "lmms-scene-submission"
SCHEMA_VERSION = 1
SCHEMA_FILE = "submission.schema.json"
#: more empty outputs than this share of a task's rows refuses the submission
MAX_EMPTY_RATE = 0.05


class Refused(ValueError):
    """A submission cannot be built; ``reasons`` lists every reason."""

    def __init__(self, reasons: Sequence[str]):
        self.reasons = list(reasons)
        super().__init__("refused to build a submission:\n" + "\n".join(f"  - {r}" for r in self.reasons))


# -- the schema and a small validator ---------------------------------------------------


def schema() -> dict[str, Any]:
    """The submission JSON Schema (``lmms_scene/report/submission.schema.json``)."""
    from importlib import resources

    return json.loads(resources.files("lmms_scene.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_KNOWN = {
    "$schema", "$id", "$defs", "title", "description", "type", "required", "properties", "additionalProperties",
    "items", "minItems", "maxItems", "minProperties", "enum", "const", "minimum", "maximum", "minLength",
    "pattern", "anyOf", "$ref",
}  # fmt: skip


def validate(instance: Any, schema_: Mapping[str, Any] | None = None) -> list[str]:
    """Every way ``instance`` breaks the schema, as ``"$.path: message"`` (empty: valid).

    Supports the keywords the submission schema uses (type, required, properties,
    additionalProperties, items, min/maxItems, minProperties, enum, const, minimum,
    maximum, minLength, pattern, anyOf, local ``$ref``); any other keyword is an error,
    so a schema edit cannot be silently ignored.

    >>> validate({"a": 1}, {"type": "object", "required": ["a", "b"]})
    ["$: missing required field 'b'"]
    """
    root = schema() if schema_ is None else schema_
    errors: list[str] = []
    _check(instance, root, root, "$", errors)
    return errors


def _resolve_ref(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"schema: only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _check(value: Any, sch: Mapping[str, Any], root: Mapping[str, Any], path: str, errors: list[str]) -> None:
    unknown = set(sch) - _KNOWN
    if unknown:
        raise ValueError(f"schema at {path}: unsupported keywords {sorted(unknown)}")
    if "$ref" in sch:
        _check(value, _resolve_ref(root, sch["$ref"]), root, path, errors)
        return
    if "anyOf" in sch:
        branches = []
        for option in sch["anyOf"]:
            sub: list[str] = []
            _check(value, option, root, path, sub)
            if not sub:
                break
            branches.append("; ".join(sub))
        else:
            errors.append(f"{path}: matches none of the allowed forms ({' | '.join(branches)})")
        return
    if "type" in sch:
        types = sch["type"] if isinstance(sch["type"], list) else [sch["type"]]
        if not any(_TYPES[t](value) for t in types):
            errors.append(f"{path}: expected {' or '.join(types)}, got {type(value).__name__} {_short(value)}")
            return
    if "const" in sch and value != sch["const"]:
        errors.append(f"{path}: expected {sch['const']!r}, got {_short(value)}")
    if "enum" in sch and value not in sch["enum"]:
        errors.append(f"{path}: expected one of {sch['enum']!r}, got {_short(value)}")
    if isinstance(value, str):
        if len(value) < sch.get("minLength", 0):
            errors.append(f"{path}: expected at least {sch['minLength']} characters, got {value!r}")
        if "pattern" in sch and not re.search(sch["pattern"], value):
            errors.append(f"{path}: {value!r} does not match the pattern {sch['pattern']!r}")
    if _TYPES["number"](value):
        if "minimum" in sch and value < sch["minimum"]:
            errors.append(f"{path}: expected >= {sch['minimum']}, got {value!r}")
        if "maximum" in sch and value > sch["maximum"]:
            errors.append(f"{path}: expected <= {sch['maximum']}, got {value!r}")
    if isinstance(value, list):
        if len(value) < sch.get("minItems", 0):
            errors.append(f"{path}: expected at least {sch['minItems']} items, got {len(value)}")
        if "maxItems" in sch and len(value) > sch["maxItems"]:
            errors.append(f"{path}: expected at most {sch['maxItems']} items, got {len(value)}")
        if "items" in sch:
            for i, item in enumerate(value):
                _check(item, sch["items"], root, f"{path}[{i}]", errors)
    if isinstance(value, dict):
        for name in sch.get("required", ()):
            if name not in value:
                errors.append(f"{path}: missing required field {name!r}")
        if len(value) < sch.get("minProperties", 0):
            errors.append(f"{path}: expected at least {sch['minProperties']} entries, got {len(value)}")
        props = sch.get("properties", {})
        extra = sch.get("additionalProperties", True)
        for key, item in value.items():
            where = f"{path}.{key}"
            if key in props:
                _check(item, props[key], root, where, errors)
            elif extra is False:
                errors.append(f"{path}: unknown field {key!r}")
            elif isinstance(extra, dict):
                _check(item, extra, root, where, errors)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def check(submission: Any) -> list[str]:
    """:func:`validate` plus the rules the schema cannot say; empty when the submission is valid."""
    errors = validate(submission)
    if errors:
        return errors
    tasks = submission["tasks"]
    for bench, entry in submission["benchmarks"].items():
        where = f"$.benchmarks.{bench}"
        if entry["headline"] not in entry["metrics"]:
            errors.append(f"{where}.headline: {entry['headline']!r} is not one of its metrics {sorted(entry['metrics'])}")
        for key, metric in entry["metrics"].items():
            if key != f"{metric['task']}/{metric['metric']}":
                errors.append(f"{where}.metrics.{key}: key should be {metric['task']}/{metric['metric']!s}")
            if metric["task"] not in tasks:
                errors.append(f"{where}.metrics.{key}.task: {metric['task']!r} is not in $.tasks")
            elif tasks[metric["task"]]["benchmark"] != bench:
                errors.append(f"{where}.metrics.{key}.task: {metric['task']!r} belongs to {tasks[metric['task']]['benchmark']!r}")
            ci = metric["ci95"]
            if ci is not None and not ci[0] <= ci[1]:
                errors.append(f"{where}.metrics.{key}.ci95: lower bound {ci[0]} above upper bound {ci[1]}")
    return errors


# -- what each benchmark contributes ------------------------------------------------------


@dataclass(frozen=True)
class Headline:
    """Where a benchmark's headline numbers live in a task's results."""

    #: the metric key whose value is the benchmark's report (a breakdown with intervals)
    report_key: str
    #: metrics read from the report's overall cell, the first one ranks the leaderboard
    metrics: tuple[str, ...]


HEADLINES: dict[str, Headline] = {
    "cooco": Headline("cooco_breakdown", ("refclipscore", "accuracy", "levenshtein_accuracy")),
    "snus": Headline("snus_report", ("CESG", "F1_o", "F1_a", "F1_r")),
    # the paper's headline: Table 1's retained accuracy (a per-schedule run: from its group)
    "layered_vqa": Headline("layered_vqa_report", ("retained_text", "retained_visual", "retained_layered", "accuracy")),
}


def _overall_cell(bench: str, report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if bench == "snus":
        model = report.get("model")
        return model.get("summary") if isinstance(model, Mapping) else None
    cell = report.get("overall")
    return cell if isinstance(cell, Mapping) else None


def _provenance(bench: str, report: Mapping[str, Any]) -> dict[str, Any] | None:
    if bench == "snus":
        prov = (report.get("model") or {}).get("provenance")
    else:
        prov = report.get("scorer")
    return dict(prov) if isinstance(prov, Mapping) and prov else None


def _failures(bench: str, report: Mapping[str, Any], task: str, max_empty_rate: float) -> tuple[dict[str, Any], list[str]]:
    """The failure counts of one task's report and the reasons they refuse a submission."""
    reasons: list[str] = []
    if bench == "cooco":
        stats = report.get("output_statistics") or {}
        n, n_empty, n_unscored = stats.get("n"), stats.get("n_empty"), stats.get("n_unscored")
        counts = {"n": n, "n_empty": n_empty, "n_unscored": n_unscored}
    elif bench == "snus":
        c = (report.get("model") or {}).get("counts") or {}
        n, n_empty = c.get("n"), c.get("n_empty_prediction")
        n_unscored = 0  # every SNUS row gets a status; excluded references are counted apart
        counts = {k: v for k, v in c.items()}
        counts.update(n_empty=n_empty, n_unscored=n_unscored)
        if c.get("n_judge_failures"):  # CESG's Q_v / Q_e judges, when the report counts them
            reasons.append(f"{task}: {c['n_judge_failures']} CESG judge failures")
    else:
        cell = report.get("overall") or {}
        n = report.get("n_rows")
        rate = cell.get("empty_output_rate")
        n_empty = round(rate * n) if isinstance(rate, (int, float)) and isinstance(n, int) else None
        n_unscored = report.get("n_failed_conversations")
        counts = {"n": n, "n_empty": n_empty, "n_unscored": n_unscored, "n_failed_conversations": n_unscored}
        judges = report.get("judges")
        if isinstance(judges, Mapping):
            counts["judge_failed_calls"] = judges.get("failed_calls", 0)
            counts["judge_no_consensus"] = judges.get("no_consensus", 0)
            if counts["judge_failed_calls"] or counts["judge_no_consensus"]:
                reasons.append(
                    f"{task}: judge failures ({counts['judge_failed_calls']} failed judge calls, "
                    f"{counts['judge_no_consensus']} rows without consensus)"
                )
    if not isinstance(n, int) or n_empty is None or n_unscored is None:
        reasons.append(f"{task}: its {HEADLINES[bench].report_key} does not record how many outputs were empty or unscored")
        return counts, reasons
    rate = n_empty / n if n else 0.0
    counts["empty_output_rate"] = rate
    counts["max_empty_rate"] = max_empty_rate
    if rate > max_empty_rate:
        reasons.append(f"{task}: {n_empty} of {n} outputs are empty ({rate:.1%} > the {max_empty_rate:.1%} allowed)")
    if n_unscored:
        what = "failed conversations" if bench == "layered_vqa" else "rows could not be scored"
        reasons.append(f"{task}: {n_unscored} {what}")
    return counts, reasons


def _judge_failures_in_samples(result) -> int:
    """Rows whose logged scores record judge failures (CESG's Q_v / Q_e judges)."""
    n = 0
    for sample in result.samples or []:
        for value in sample.values():
            if isinstance(value, Mapping) and value.get("judge_failures"):
                n += 1
                break
    return n


def _task_rank(bench, task: str) -> tuple[int, str]:
    """Order of a task inside its benchmark: the registry's order of its tasks (a user's
    built task ``<our task>_<name>`` ranks with ``<our task>``), then the name."""
    best = None
    for i, name in enumerate(bench.tasks):
        matches = task == name or task.startswith(name + "_")
        if matches and (best is None or len(name) > len(bench.tasks[best])):
            best = i
    return (len(bench.tasks) if best is None else best, task)


# -- the sample-split rule ----------------------------------------------------------------


def sample_reason(result) -> str | None:
    """Why ``result`` is a sample split (None: it is not one)."""
    from lmms_scene import benchmarks

    for bench in benchmarks.BENCHMARKS:
        if result.task in bench.sample_tasks:
            return f"{result.task}: a sample split ({bench.title}'s embedded sample), not the benchmark"
    metadata = result.config.get("metadata") if isinstance(result.config.get("metadata"), Mapping) else {}
    if metadata.get("sample"):
        return f"{result.task}: its config marks the dataset as a sample (metadata.sample: {metadata['sample']!r})"
    for path in _data_files(result.config):
        if "sample" in Path(path).parts[:-1]:
            return f"{result.task}: reads a sample data file ({path})"
    return None


def _data_files(config: Mapping[str, Any]) -> list[str]:
    kwargs = config.get("dataset_kwargs") if isinstance(config.get("dataset_kwargs"), Mapping) else {}
    files = kwargs.get("data_files")
    out: list[str] = []
    if isinstance(files, str):
        out.append(files)
    elif isinstance(files, Mapping):
        for v in files.values():
            out.extend([v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else [])
    elif isinstance(files, list):
        out.extend(x for x in files if isinstance(x, str))
    return out


def _sha256(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _dataset(config: Mapping[str, Any]) -> dict[str, Any]:
    """Where a task's data came from and which revision (None with a note when unrecorded)."""
    kwargs = config.get("dataset_kwargs") if isinstance(config.get("dataset_kwargs"), Mapping) else {}
    path = config.get("dataset_path")
    revision = config.get("revision") or kwargs.get("revision")
    out: dict[str, Any] = {"path": None if path is None else str(path), "name": config.get("dataset_name"),
                           "revision": None if revision is None else str(revision)}  # fmt: skip
    files = _data_files(config)
    if files:
        yaml_dir = Path(str(config.get("__yaml_path__", "."))).parent
        entries = []
        for f in files:
            p = Path(f) if Path(f).is_absolute() else yaml_dir / f
            entries.append({"path": f, "sha256": _sha256(p)})
        out["data_files"] = entries
    if out["revision"] is None:
        if files:
            out["revision_note"] = "local data files: no hub revision; identified by their sha256 (null: file not found here)"
        else:
            out["revision_note"] = "the results do not record a dataset revision (the task config sets none)"
    return out


def _run_info(source: Path) -> dict[str, Any]:
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- building -------------------------------------------------------------------------------


def build(paths: str | Path | Iterable[str | Path], *, max_empty_rate: float = MAX_EMPTY_RATE) -> dict[str, Any]:
    """The submission for the results under ``paths``; raises :class:`Refused` listing why not."""
    from lmms_scene import __version__, benchmarks
    from lmms_scene.provenance import library_version
    from lmms_scene.results import load
    from lmms_scene.validation import probability

    probability(max_empty_rate, "max_empty_rate")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    loaded = load(paths)
    reasons: list[str] = [f"skipped {p}: {why}" for p, why in loaded.skipped]
    # a group's entry in the results only pools its tasks, which are checked one by one
    ours = [r for r in loaded.results if r.benchmark in HEADLINES and r.metrics and not r.config.get("group")]
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
    for r in ours:
        if r.limit is not None:
            reasons.append(f"{r.task}: the run used --limit {r.limit} (a submission needs every doc)")
        why = sample_reason(r)
        if why:
            reasons.append(why)

    runs = {r.source: _run_info(r.source) for r in ours}
    lmms_eval = sorted({str(v) for info in runs.values() if (v := info.get("lmms_eval_version"))})
    versions: dict[str, Any] = {"lmms_scene": __version__, "lmms_eval": None}
    if len(lmms_eval) == 1:
        versions["lmms_eval"] = lmms_eval[0]
        versions["lmms_eval_note"] = "as recorded in the results file"
    elif len(lmms_eval) > 1:
        reasons.append(f"the results come from several lmms-eval versions: {', '.join(lmms_eval)}")
    else:
        installed = library_version("lmms_eval") or library_version("lmms-eval")
        versions["lmms_eval"] = installed
        versions["lmms_eval_note"] = ("not recorded in the results; this is the installed version" if installed
                                      else "not recorded in the results, and lmms-eval is not installed")  # fmt: skip
    versions_scene = sorted({str(v) for r in ours if (v := _scene_version(r))} - {__version__})
    if versions_scene:
        versions["lmms_scene"] = versions_scene[0] if len(versions_scene) == 1 else ", ".join(versions_scene)

    tasks: dict[str, Any] = {}
    out_benchmarks: dict[str, Any] = {}
    for r in sorted(ours, key=lambda r: (r.benchmark, _task_rank(benchmarks.get(r.benchmark), r.task))):
        info = runs[r.source]
        n_samples = (info.get("n-samples") or {}).get(r.task) or {}
        tasks[r.task] = {
            "benchmark": r.benchmark,
            "version": (info.get("versions") or {}).get(r.task, (r.config.get("metadata") or {}).get("version")),
            "n_samples": n_samples.get("effective") if isinstance(n_samples.get("effective"), int) else None,
            "task_hash": (info.get("task_hashes") or {}).get(r.task),
            "dataset": _dataset(r.config),
        }
        spec = HEADLINES[r.benchmark]
        report = r.metrics.get(spec.report_key)
        if not isinstance(report, Mapping):
            reasons.append(f"{r.task}: no {spec.report_key} in its results (was it run with lmms-scene's task YAML?)")
            continue
        cell = _overall_cell(r.benchmark, report)
        prov = _provenance(r.benchmark, report)
        if cell is None:
            reasons.append(f"{r.task}: its {spec.report_key} has no overall cell")
            continue
        if prov is None:
            reasons.append(f"{r.task}: its {spec.report_key} does not say what computed it (no provenance record)")
        entry = out_benchmarks.setdefault(r.benchmark, {"headline": f"{r.task}/{spec.metrics[0]}", "metrics": {},
                                                        "not_computed": [], "provenance": {}, "failures": {}})  # fmt: skip
        hib = (info.get("higher_is_better") or {}).get(r.task) or {}
        for name in spec.metrics:
            value = cell.get(name)
            key = f"{r.task}/{name}"
            if not _num(value):
                entry["not_computed"].append(key)
                continue
            ci = (cell.get("ci95") or {}).get(name)
            n = cell.get("n")
            missing = (cell.get("not_computed") or {}).get(name, 0)
            entry["metrics"][key] = {
                "task": r.task, "metric": name, "value": float(value),
                "ci95": [float(ci[0]), float(ci[1])] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None,
                "n": n - missing if isinstance(n, int) else None,
                "higher_is_better": bool(hib.get(name, True)),
            }  # fmt: skip
        entry["provenance"][r.task] = prov or {}
        counts, why = _failures(r.benchmark, report, r.task, max_empty_rate)
        judged = _judge_failures_in_samples(r)
        counts["rows_with_judge_failures"] = judged
        if judged:
            why.append(f"{r.task}: {judged} rows record judge failures in the logged samples")
        entry["failures"][r.task] = counts
        reasons.extend(why)
    for bench, entry in out_benchmarks.items():
        _group_headline(bench, entry, loaded, tasks)
        if entry["headline"] in entry["not_computed"]:
            reasons.append(f"{bench}: the headline metric {entry['headline']} was not computed, so it cannot be ranked "
                           "(see the task's provenance for why, e.g. CLIP switched off)")  # fmt: skip
        if not entry["not_computed"]:
            del entry["not_computed"]
    if reasons:
        raise Refused(reasons)
    name, model_args = models[0]
    submission = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "model": {"name": ours[0].label, "model": name, "model_args": model_args},
        "versions": versions,
        "tasks": tasks,
        "benchmarks": out_benchmarks,
        "sources": sorted({str(r.source) for r in ours}),
    }
    errors = check(submission)
    if errors:  # a bug here, not the user's input: say so
        raise RuntimeError("lmms-scene built an invalid submission (please report): " + "; ".join(errors))
    return submission


def _group_headline(bench: str, entry: dict[str, Any], loaded, tasks: dict[str, Any]) -> None:
    """Layered-VQA run as one task per schedule: no task alone computes retained accuracy,
    its group does (from the tasks' parts). Take the headline metrics from the group then;
    with no group either (some schedules only), the first headline metric its first task
    computed (accuracy), so such a run ranks apart from complete ones."""
    if bench != "layered_vqa" or entry["headline"] not in entry["not_computed"]:
        return
    spec = HEADLINES[bench]
    for g in loaded.results:
        if g.benchmark != bench or not g.config.get("group"):
            continue
        found = {name: g.metrics.get(name) for name in spec.metrics if _num(g.metrics.get(name))}
        if spec.metrics[0] not in found:
            continue
        for name, value in found.items():
            entry["metrics"][f"{g.task}/{name}"] = {"task": g.task, "metric": name, "value": float(value), "ci95": None,
                                                   "n": None, "higher_is_better": True}  # fmt: skip
        member = next((t for t in tasks.values() if t["benchmark"] == bench), None)
        tasks[g.task] = {"benchmark": bench, "version": None, "n_samples": None, "task_hash": None,
                         "dataset": dict(member["dataset"]) if member else None}  # fmt: skip
        entry["headline"] = f"{g.task}/{spec.metrics[0]}"
        entry["not_computed"] = [k for k in entry["not_computed"] if not k.endswith(tuple(f"/{n}" for n in found))]
        return
    task = entry["headline"].split("/", 1)[0]
    for name in spec.metrics:
        if f"{task}/{name}" in entry["metrics"]:
            entry["headline"] = f"{task}/{name}"
            return


def _scene_version(result) -> str | None:
    spec = HEADLINES.get(result.benchmark)
    report = result.metrics.get(spec.report_key) if spec else None
    prov = _provenance(result.benchmark, report) if isinstance(report, Mapping) else None
    if not prov:
        return None
    if result.benchmark == "snus":
        prov = prov.get("cesg") or {}
    return prov.get("lmms_scene_version")


def write(submission: Mapping[str, Any], out: str | Path) -> Path:
    """Write a submission (checked first) as indented JSON."""
    errors = check(submission)
    if errors:
        raise ValueError("not a valid submission: " + "; ".join(errors))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(submission, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return out


def read(path: str | Path) -> tuple[dict[str, Any] | None, list[str]]:
    """A submission file and its problems (the JSON is None when it cannot be parsed)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot be read ({exc})"]
    except json.JSONDecodeError as exc:
        return None, [f"not JSON (line {exc.lineno}: {exc.msg})"]
    if isinstance(data, dict) and data.get("format") == FORMAT and data.get("schema_version") != SCHEMA_VERSION:
        return data, [f"schema_version {data.get('schema_version')!r}: this lmms-scene reads version {SCHEMA_VERSION}"]
    return data, check(data)
