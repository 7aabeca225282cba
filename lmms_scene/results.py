"""Reading lmms-eval output: results JSONs, samples JSONLs, or folders of them.

lmms-eval 0.7.3 writes ``OUTPUT/<model>/<date>_results.json`` and, with
``--log_samples``, ``<date>_samples_<task>.jsonl`` beside it. :func:`load` turns any of
these (or a folder holding them, searched recursively) into :class:`TaskResult` records:
one per task, with the task's metrics (filter suffix stripped), its config (including
``metadata.benchmark``), the model that ran and, when the samples file is there, the
logged samples. Files that cannot be read are listed with the reason, never raised
one by one, so a tool can say what it skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import benchmarks
from lmms_scene.files import read_jsonl


@dataclass
class TaskResult:
    task: str
    #: the benchmark the task declares (``metadata.benchmark``), or None
    benchmark: str | None
    #: metric name (``,none`` filter suffix stripped) -> value
    metrics: dict[str, Any]
    config: dict[str, Any]
    #: ``model`` and ``model_args`` of the run
    model: str
    model_args: str
    source: Path
    #: the logged samples (one dict per doc, as lmms-eval wrote them), when found
    samples: list[dict[str, Any]] | None = None
    #: ``limit`` of the run (None: every doc)
    limit: Any = None

    @property
    def label(self) -> str:
        """A short name for the model: its ``pretrained=`` basename, else the model name."""
        for part in str(self.model_args).split(","):
            if part.startswith("pretrained="):
                return part.split("=", 1)[1].rstrip("/").rsplit("/", 1)[-1]
        return self.model

    @property
    def dataset(self) -> dict[str, Any]:
        """Which data this result scored: the fingerprint the task's report recorded
        (:func:`lmms_scene.metrics.rows.dataset_identity`), else what the config says
        (hub repository and revision, or local data files by sha256), with the split."""
        config = self.config
        out: dict[str, Any] = {
            "path": config.get("dataset_path"),
            "split": config.get("test_split"),
            "revision": config.get("revision") or (config.get("dataset_kwargs") or {}).get("revision"),
        }
        report = None
        if self.benchmark:
            try:
                report = self.metrics.get(benchmarks.get(self.benchmark).report_key)
            except KeyError:
                report = None
        identity = report.get("dataset") if isinstance(report, dict) else None
        if isinstance(identity, dict) and identity.get("fingerprint"):
            out.update(fingerprint=str(identity["fingerprint"]), n_rows=identity.get("n_rows"), recorded=True)
            return out
        files = data_files(config)
        digests = [file_sha256(_resolve(f, config)) for f in files]
        if files and all(digests):
            out["fingerprint"] = "files:" + hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()
        elif out["path"] and not files:
            out["fingerprint"] = f"hub:{out['path']}@{out['revision'] or 'unpinned'}"
        else:
            out["fingerprint"] = None
        out["recorded"] = False
        return out

    @property
    def fingerprint(self) -> str | None:
        return self.dataset.get("fingerprint")

    def rows(self, key: str) -> list[dict[str, Any]]:
        """The per-doc values a samples file holds under metric ``key`` (e.g. the full
        scored rows a benchmark logs), in file order; empty without samples."""
        return [s[key] for s in self.samples or [] if isinstance(s.get(key), dict)]


def data_files(config: dict[str, Any]) -> list[str]:
    """The local data files a task config reads (``dataset_kwargs.data_files``)."""
    kwargs = config.get("dataset_kwargs") if isinstance(config.get("dataset_kwargs"), dict) else {}
    files = kwargs.get("data_files")
    out: list[str] = []
    if isinstance(files, str):
        out.append(files)
    elif isinstance(files, dict):
        for v in files.values():
            out.extend(
                [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
            )
    elif isinstance(files, list):
        out.extend(x for x in files if isinstance(x, str))
    return out


def _resolve(name: str, config: dict[str, Any]) -> Path:
    path = Path(name)
    return path if path.is_absolute() else Path(str(config.get("__yaml_path__", "."))).parent / path


def file_sha256(path: Path) -> str | None:
    """The sha256 of a file (None when it cannot be read here)."""
    try:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


@dataclass
class Loaded:
    results: list[TaskResult] = field(default_factory=list)
    #: (path, reason) for every file that was skipped
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def for_benchmark(self, name: str) -> list[TaskResult]:
        return [r for r in self.results if r.benchmark == name]


def _strip_filter(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in metrics.items():
        name, _, filt = key.partition(",")
        if filt in ("", "none"):
            out[name] = value
    return out


def _benchmark(task: str, config: dict[str, Any]) -> str | None:
    declared = benchmarks.declared_benchmark(config)
    if declared:
        return declared
    try:
        return benchmarks.benchmark_of_task(task).name
    except ValueError:
        return None


def _read_samples(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path)


def read_results_file(path: Path) -> list[TaskResult]:
    """The tasks of one ``*_results.json`` (with their samples files when present)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"{path}: not an lmms-eval results file (no 'results' object)")
    run = data.get("config") if isinstance(data.get("config"), dict) else {}
    configs = data.get("configs") if isinstance(data.get("configs"), dict) else {}
    prefix = path.name[: -len("_results.json")] if path.name.endswith("_results.json") else None
    groups = data.get("group_subtasks") if isinstance(data.get("group_subtasks"), dict) else {}
    out = []
    for task, metrics in data["results"].items():
        if not isinstance(metrics, dict):
            continue
        config = configs.get(task) if isinstance(configs.get(task), dict) else {}
        if not config and task in groups:
            # a group has no config of its own: it belongs to the benchmark all its tasks declare

            declared = {benchmarks.declared_benchmark(configs.get(t) or {}) for t in groups[task] or []}
            if len(declared) == 1 and None not in declared:
                config = {
                    "metadata": {"benchmark": declared.pop()},
                    "group": task,
                    "subtasks": list(groups[task] or []),
                }
        samples = None
        if prefix is not None:
            candidate = path.with_name(f"{prefix}_samples_{task}.jsonl")
            if candidate.is_file():
                samples = _read_samples(candidate)
        out.append(
            TaskResult(
                task=task,
                benchmark=_benchmark(task, config),
                metrics=_strip_filter(metrics),
                config=config,
                model=str(run.get("model", "?")),
                model_args=str(run.get("model_args", "")),
                source=path,
                samples=samples,
                limit=run.get("limit"),
            )
        )
    return out


def read_samples_file(path: Path) -> TaskResult:
    """A lone samples JSONL (``..._samples_<task>.jsonl``) as a result without metrics."""
    name = path.stem
    task = name.split("_samples_", 1)[1] if "_samples_" in name else name
    return TaskResult(
        task=task,
        benchmark=_benchmark(task, {}),
        metrics={},
        config={},
        model="?",
        model_args="",
        source=path,
        samples=_read_samples(path),
    )


def load(paths: str | Path | Iterable[str | Path]) -> Loaded:
    """Every task result under ``paths`` (files or folders); see the module docstring."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    loaded = Loaded()
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            here = sorted(p.rglob("*_results.json")) or sorted(p.rglob("*_samples_*.jsonl"))
            files += here
            if not here:
                loaded.skipped.append((str(p), "no *_results.json or *_samples_*.jsonl in this folder"))
        elif p.is_file():
            files.append(p)
        else:
            loaded.skipped.append((str(p), "no such file or folder"))
    for f in files:
        try:
            if f.suffix == ".jsonl":
                loaded.results.append(read_samples_file(f))
            else:
                loaded.results.extend(read_results_file(f))
        except ValueError as exc:
            loaded.skipped.append((str(f), str(exc)))
    return loaded


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table; ``None`` cells are blank, floats get 3 decimals."""

    def fmt(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def with_interval(mean: float | None, interval: Sequence[float] | None) -> str:
    """``0.612 [0.580, 0.640]``; blank when there is no mean."""
    if mean is None:
        return ""
    if not interval:
        return f"{mean:.3f}"
    return f"{mean:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def stored_report(
    result: TaskResult, key: str, holds: str, rebuild: Callable[[list[dict]], Mapping[str, Any]] | None = None
) -> Mapping[str, Any] | None:
    """A results module's ``report_of``: the report the results hold under ``key`` when it
    is a mapping whose ``holds`` entry is one too; for a lone samples file (no results
    JSON), ``rebuild`` (the task's own aggregation) over its logged rows, when given."""
    rep = result.metrics.get(key)
    if rep is None and rebuild is not None and not result.metrics and result.samples:
        rows = result.rows(key)
        rep = rebuild(rows) if rows else None
    return rep if isinstance(rep, Mapping) and isinstance(rep.get(holds), Mapping) else None


def short_fingerprint(fingerprint: str | None) -> str:
    """A fingerprint as people read it: 12 characters (a ``files:`` / ``hub:`` one whole)."""
    if not fingerprint:
        return "unknown data"
    if fingerprint.startswith("hub:"):
        return fingerprint
    return fingerprint.split(":", 1)[-1][:12]


def _args(model_args: str) -> list[str]:
    return [part.strip() for part in str(model_args or "").split(",") if part.strip()]


def _run_names(results: Sequence[TaskResult]) -> dict[int, str]:
    """A name per result: its model's :attr:`TaskResult.label`, and where runs that share
    that label differ in ``model_args`` (two settings of one model class, two checkpoints
    with one basename), the label followed by the ``model_args`` parts that tell them
    apart, so they are never pooled as one model."""
    by_label: dict[str, set[tuple[str, ...]]] = {}
    for r in results:
        by_label.setdefault(r.label, set()).add((r.model, *_args(r.model_args)))
    names: dict[int, str] = {}
    for r in results:
        variants = by_label[r.label]
        if len(variants) == 1:
            names[id(r)] = r.label
            continue
        common = set.intersection(*(set(v) for v in variants))
        own = [part for part in (r.model, *_args(r.model_args)) if part not in common]
        names[id(r)] = f"{r.label} ({', '.join(own) or 'default model_args'})"
    return names


def label_runs(results: Sequence[TaskResult]) -> tuple[dict[int, str], list[str]]:
    """A display label per result (keyed by ``id(result)``) and the notes that state any
    mixture of datasets, per benchmark.

    A result is labelled by its model (:attr:`TaskResult.label`; runs of one model that
    differ in ``model_args`` add the parts that differ, as ``scene_blind (prior=uniform)``);
    when the results of one
    benchmark hold more than one dataset (:attr:`TaskResult.dataset`), every one of them is
    labelled ``model [data <fingerprint>]`` instead, so rows of two datasets are never
    pooled or interleaved under one name, and a note says which datasets are present."""
    labels: dict[int, str] = {}
    notes: list[str] = []
    by_bench: dict[str | None, list[TaskResult]] = {}
    for r in results:
        by_bench.setdefault(r.benchmark, []).append(r)
    for bench, mine in by_bench.items():
        # a group holds no rows of its own: it is the dataset of the tasks it groups
        # (in the same results file), and is never a dataset of its own
        tasks = [r for r in mine if not r.config.get("group")]
        group_data: dict[int, str | None] = {}
        for g in mine:
            if g.config.get("group"):
                found = {
                    r.fingerprint for r in tasks if r.source == g.source and r.task in (g.config.get("subtasks") or [])
                }
                group_data[id(g)] = found.pop() if len(found) == 1 else None
        datasets: dict[str | None, list[TaskResult]] = {}
        for r in tasks:
            datasets.setdefault(r.fingerprint, []).append(r)
        mixed = len(datasets) > 1
        runs = _run_names(mine)
        for r in mine:
            fp = group_data[id(r)] if id(r) in group_data else r.fingerprint
            labels[id(r)] = f"{runs[id(r)]} [data {short_fingerprint(fp)}]" if mixed else runs[id(r)]
        if mixed and bench is not None:
            title = benchmarks.get(bench).title if bench in benchmarks.names() else bench
            parts = []
            for fp, rs in datasets.items():
                rows = sorted({n for r in rs if isinstance(n := r.dataset.get("n_rows"), int)})
                size = f", {'/'.join(map(str, rows))} rows" if rows else ""
                parts.append(
                    f"{short_fingerprint(fp)} ({', '.join(sorted({r.task for r in rs}))}{size}; "
                    f"{', '.join(sorted({r.label for r in rs}))})"
                )
            notes.append(
                f"{title}: these results hold {len(datasets)} different datasets: "
                + "; ".join(parts)
                + ". They are shown as separate rows, labelled by dataset, and never pooled."
            )
    return labels, notes
