"""The one list of lmms-scene's benchmarks.

Every tool that needs to know which benchmarks exist (the demo, ``scene_blind``, the
name-collision test, the command line, ``build-samples``, ``show``) reads
:data:`BENCHMARKS`. Adding a benchmark is one :class:`Benchmark` entry here plus its
own modules (data module, task folder, templates, metrics, blind prior, docs page).

A task says which benchmark it belongs to in its YAML ``metadata``
(``metadata: {benchmark: cooco}``), so a task a user built (``lmms-scene build cooco
... --out D`` writes one) is recognised by what it declares, not by its name; see
:func:`benchmark_of_task`.

>>> get("cooco").title
'COOCO'
>>> get("layered-vqa").name
'layered_vqa'
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from lmms_scene import registration, settings
from lmms_scene.data.layered_vqa import schedules as layered_vqa_schedules
from lmms_scene.registration import tasks_path

#: The YAML ``metadata`` key through which a task declares its benchmark.
METADATA_KEY = "benchmark"


@dataclass(frozen=True)
class Metric:
    """One metric of a benchmark, declared once: everything that names it reads it from here.

    A benchmark's :attr:`Benchmark.metrics`, in order, is the one list. From it come the task
    YAML's ``metric_list`` (the metrics with ``task``; ``python -m lmms_scene.tasks._generate_metrics``
    writes it, tests/test_metric_declarations.py checks it), the keys ``process_results``
    returns, the headline of a submission and the leaderboard's columns (``headline``), the
    columns and titles of the benchmark's tables (``column``), and the report dict the tables
    read (``report``). The direction and valid range of a headline number are declared here,
    and the leaderboard takes them from here, never from a submission."""

    name: str
    #: how a table, figure or the leaderboard writes it ("": its name)
    title: str = ""
    higher_is_better: bool = True
    low: float = 0.0
    #: None: no upper bound
    high: float | None = 1.0
    #: a headline number: a submission states it and the leaderboard shows it
    headline: bool = False
    #: in the task YAML's ``metric_list`` (the harness aggregates it); False: the report
    #: holds it (the tables or the headline read it from there)
    task: bool = True
    #: the aggregation function in ``tasks/<bench>/utils.py`` ("": the metric's name)
    aggregation: str = ""
    #: the group's aggregation in ``tasks/<bench>/utils.py``: the metric is in the
    #: benchmark's group YAML's ``aggregate_metric_list`` ("": not there)
    group_aggregation: str = ""
    #: the dict with everything the tables read (one per benchmark; :attr:`Benchmark.report_key`)
    report: bool = False
    #: a column or figure of the benchmark's tables, in the order of this number (each its own;
    #: 0 first); None: not one
    column: int | None = None
    #: its column heading in a table ("": its label)
    heading: str = ""

    @property
    def label(self) -> str:
        """Its title, or its name when it has none."""
        return self.title or self.name

    @property
    def column_heading(self) -> str:
        """Its heading as a table column: :attr:`heading`, else its label."""
        return self.heading or self.label

    def problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be this metric's value (None: it can)."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{self.name}: {value!r} is not a number"
        if not math.isfinite(value):
            return f"{self.name}: {value!r} is not finite"
        if value < self.low or (self.high is not None and value > self.high):
            top = "inf" if self.high is None else f"{self.high:g}"
            return f"{self.name}: {value!r} is outside its range [{self.low:g}, {top}]"
        return None


@dataclass(frozen=True)
class Release:
    """The official release of a benchmark's data: where it lives and, when known, the
    content fingerprints (:func:`lmms_scene.metrics.rows.fingerprint` of the scored rows'
    id and gold fields) of its published versions. A run on other data (a local rebuild
    that differs, a generated build) is reported as what it is, never ranked as the
    benchmark."""

    #: the hub dataset (None: no public release is known yet)
    hub: str | None
    split: str = "test"
    license: str = "other"
    #: task name -> fingerprints of the official data as that task scores it
    fingerprints: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Benchmark:
    """What lmms-scene knows about one benchmark."""

    #: identifier, also the task folder under ``tasks/`` and the ``metadata.benchmark`` value
    name: str
    #: how people write it
    title: str
    #: the paper it implements (short citation) and its file under ``shared/papers/``
    paper: str
    paper_file: str
    #: headline tasks and groups (the harness names users type)
    tasks: tuple[str, ...]
    groups: tuple[str, ...]
    #: the tasks on the embedded sample split (offline)
    sample_tasks: tuple[str, ...]
    #: module with ``features()``, the builders and ``build_sample(folder)`` (the package
    #: ``lmms_scene.data.<bench>``; Layered-VQA's builder module: that package re-exports nothing)
    data_module: str
    #: ``module:function`` answering ``(doc, prompt) -> str`` for ``scene_blind``
    blind_prior: str
    #: the docs page, relative to the repository root
    docs: str
    #: the spelling on the command line (``lmms-scene build NAME``)
    cli_name: str
    #: optional ``module:function`` scoring a task's ``(doc, answer)`` pairs in batches after
    #: generation and before ``process_results`` (see :func:`lmms_scene.harness.install_prescore_hook`)
    prescore: str | None = None
    #: what to do when the release cannot be loaded (offline): how to build it locally
    build_hint: str | None = None
    #: the paper's BibTeX entry (with its year)
    citation: str = ""
    #: every metric, declared once, in the task YAML's order (:class:`Metric` says what is
    #: derived from it): the headline numbers (the paper's first; the leaderboard shows them
    #: all), the harness's metric list, the tables' columns and the report dict
    metrics: tuple[Metric, ...] = ()
    #: the headline metric the leaderboard ranks by (its direction is the metric's): one a
    #: constant answer cannot top (empty: the first headline metric)
    ranking: str = ""
    #: the module that reads this benchmark's results: ``report_of``, ``summary``, ``failures``,
    #: ``verification_rows``, ``recompute``, ``row_failures`` and ``view(results, labels)``, the
    #: tables and figures ``show``, ``report`` and the HTML page render (:mod:`lmms_scene.report.tables`)
    results_module: str = ""
    #: the official data, for the leaderboard's "is this the benchmark?" check
    release: Release = field(default_factory=lambda: Release(None))
    #: ``module:function`` building the dataset from its sources for ``publish``:
    #: ``(out, *, folder=None, hub=None, metadata=None) -> (folder, source sentence)``
    builder: str | None = None
    #: what the ``n`` of a headline cell counts, and what its interval resamples
    n_counts: str = "items"
    resamples: str = "items"
    #: the module holding the per-item scoring (:class:`lmms_scene.contract.ScoringModule`)
    scoring_module: str = ""
    #: True: the headline pools the rows of several tasks (a group), and the results module
    #: is a :class:`lmms_scene.contract.PooledResultsModule` (``group_summary``). Declared
    #: here, never discovered from the module
    pooled: bool = False
    #: the folder of the benchmark's task YAMLs: empty for lmms-scene's own (``tasks/<name>``);
    #: a plugin benchmark whose tasks live elsewhere names its folder, as an absolute path
    #: (``str(Path(__file__).parent / "tasks")``)
    task_dir: str = ""

    def data(self) -> Any:
        """The module named by :attr:`data_module` (imported on demand)."""
        return importlib.import_module(self.data_module)

    def scoring(self) -> Any:
        """The module named by :attr:`scoring_module` (imported on demand)."""
        return importlib.import_module(self.scoring_module)

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(
                f"{self.name}: a metric is declared twice: {sorted({n for n in names if names.count(n) > 1})}"
            )
        reports = [m.name for m in self.metrics if m.report]
        if len(reports) > 1:
            raise ValueError(f"{self.name}: more than one report metric: {reports}")
        columns = [m.column for m in self.metrics if m.column is not None]
        if len(set(columns)) != len(columns):
            raise ValueError(f"{self.name}: two metrics hold the same table column: {sorted(columns)}")
        if self.ranking and self.ranking not in {m.name for m in self.headline}:
            raise ValueError(f"{self.name}: ranking metric {self.ranking!r} is not one of its headline metrics")

    @property
    def headline(self) -> tuple[Metric, ...]:
        """The headline numbers (:attr:`Metric.headline`), in declaration order."""
        return tuple(m for m in self.metrics if m.headline)

    @property
    def report_key(self) -> str:
        """The metric key whose value (in the results JSON) is the benchmark's report dict ("": none)."""
        return next((m.name for m in self.metrics if m.report), "")

    def task_metrics(self) -> tuple[Metric, ...]:
        """The task YAML's ``metric_list``, in order: what ``process_results`` returns a value for."""
        return tuple(m for m in self.metrics if m.task)

    def table_metrics(self) -> tuple[Metric, ...]:
        """The columns (or figures) of the benchmark's tables, in their order."""
        return tuple(sorted((m for m in self.metrics if m.column is not None), key=lambda m: m.column))

    def metric(self, name: str) -> Metric:
        """The metric declared as ``name``."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.name}: no metric {name!r}; declared: {', '.join(m.name for m in self.metrics)}")

    def results(self) -> Any:
        """The module named by :attr:`results_module` (imported on demand)."""
        return importlib.import_module(self.results_module)

    @property
    def task_folder(self) -> Path:
        """Where the benchmark's task YAMLs live: :attr:`task_dir`, else ``tasks/<name>``."""
        return Path(self.task_dir) if self.task_dir else tasks_path() / self.name

    def built(self) -> bool:
        """Whether this version of lmms-scene ships the benchmark (its sample task exists)."""
        return all((self.task_folder / f"{t}.yaml").is_file() for t in self.sample_tasks)

    @property
    def ranking_metric(self) -> Metric:
        """The :class:`Metric` the leaderboard ranks by (:attr:`ranking`, else the first headline)."""
        for m in self.headline:
            if m.name == (self.ranking or self.headline[0].name):
                return m
        raise KeyError(f"{self.name}: ranking metric {self.ranking!r} is not one of its headline metrics")

    def task_names(self) -> tuple[str, ...]:
        """Every task and group name the benchmark defines (for collision checks)."""
        return (*self.tasks, *self.groups, *self.sample_tasks)


COOCO_CITATION = """@inproceedings{merlo2025cooco,
  title     = {{COOCO} -- Common Objects Out-of-Context -- Semantic Violation in Scenes:
               Investigating Multimodal Context in Referential Communication},
  author    = {Merlo, Filippo and Takmaz, Ece and Chen, Wenkai and Gatt, Albert},
  year      = {2025},
  eprint    = {2506.22274},
  archivePrefix = {arXiv}
}"""
SNUS_CITATION = """@misc{jiang2026snus,
  title     = {Benchmarking {MLLMs} via Cognitive Expected Scene Graph for Safety-Critical
               Visual Negation Understanding},
  author    = {Jiang, Zhiyun and Wang, Hanyong and Liang, Binbin and Xie, Yu and Yang, Menglong and Li, Wei},
  year      = {2026},
  eprint    = {2609.19767},
  archivePrefix = {arXiv}
}"""
LAYERED_VQA_CITATION = """@misc{saiteja2026composition,
  title     = {Composition, Not Conversation: {VLMs} Lose the Scene, Not the Thread},
  author    = {Sai Teja, L. D. M. S. and Khan, Ufaq and Krishna, N. Siva Gopala and Tourani, Satyajit and
               Sharifdeen, Ashshak and Thoker, Fida Mohammad and Ghanem, Bernard and Khan, Muhammad Haris},
  year      = {2026}
}"""
PFRAM_CITATION = """@misc{wang2024pfram,
  title     = {Understanding Multimodal Hallucination with Parameter-Free Representation Alignment},
  author    = {Wang, Yueqian and Liang, Jianxin and Wang, Yuxuan and Zhang, Huishuai and Zhao, Dongyan},
  year      = {2024},
  eprint    = {2409.01151},
  archivePrefix = {arXiv}
}"""

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        name="cooco",
        title="COOCO",
        paper="Merlo, Takmaz, Chen, Gatt (2025). COOCO - Common Objects Out-of-Context",
        paper_file="000_f4f066f1c8ef2897.txt",
        tasks=("cooco", "cooco_noise"),
        groups=("cooco_full",),
        sample_tasks=("cooco_sample", "cooco_noise_sample"),
        data_module="lmms_scene.data.cooco",
        blind_prior="lmms_scene.baselines.cooco:blind_answer",
        docs="docs/cooco.md",
        cli_name="cooco",
        prescore="lmms_scene.tasks.cooco.utils:prescore",
        build_hint="COOCO reads fmerlo/COOCO: download it once while online, or build it from a local copy "
        "with `lmms-scene build cooco --from-folder DIR --out D` and run the command it prints (docs/cooco.md).",
        citation=COOCO_CITATION,
        metrics=(
            # the paper's Figure 3 draws the median RefCLIPScore per condition (the breakdown holds it)
            Metric("refclipscore_median", "median RefCLIPScore", high=2.5, task=False, column=0),
            # RefCLIP-S = harmonic mean of CLIP-S (2.5 max(cos, 0)) and max(cos, 0): at most 2.5
            Metric("refclipscore", "RefCLIPScore", high=2.5, headline=True, aggregation="mean_score", column=1),
            Metric("accuracy", "accuracy (CLIP text cosine >= 0.9)", headline=True, aggregation="mean_score", column=2),
            Metric("levenshtein_accuracy", "Levenshtein accuracy", headline=True, aggregation="mean_score", column=3),
            Metric("output_scene_similarity", higher_is_better=False, aggregation="mean_score"),
            Metric("context_capture_rate", higher_is_better=False, aggregation="mean_score"),
            Metric("empty_output_rate", higher_is_better=False, aggregation="mean_score"),
            Metric("cooco_breakdown", report=True, aggregation="breakdown"),
        ),
        results_module="lmms_scene.metrics.cooco.tables",
        scoring_module="lmms_scene.metrics.cooco.scoring",
        builder="lmms_scene.data.cooco:publish_build",
        # the COCO-derived images keep their Flickr licenses; the annotations are CC BY 4.0
        release=Release(hub="fmerlo/COOCO", split="test", license="other"),
        n_counts="naming items (image x noise setting)",
        resamples="images",
    ),
    Benchmark(
        name="snus",
        title="SNUS",
        paper="Jiang et al. Benchmarking MLLMs via Cognitive Expected Scene Graph (CESG)",
        paper_file="001_460ce72ffc6ddf49.txt",
        tasks=("snus",),
        groups=(),
        sample_tasks=("snus_sample",),
        data_module="lmms_scene.data.snus",
        blind_prior="lmms_scene.baselines.snus:blind_answer",
        docs="docs/snus.md",
        cli_name="snus",
        prescore="lmms_scene.tasks.snus.utils:prescore",
        citation=SNUS_CITATION,
        # Table 2's columns: the headline (CESG and its F1s) first, then the paper's columns
        metrics=(
            Metric("CESG", "CESG", headline=True, column=0),
            Metric("P_o", column=4),
            Metric("R_o", column=5),
            Metric("F1_o", "F1 objects", headline=True, column=1, heading="F1_o"),
            Metric("P_a", column=8),
            Metric("R_a", column=9),
            Metric("F1_a", "F1 attributes", headline=True, column=2, heading="F1_a"),
            Metric("P_r", column=6),
            Metric("R_r", column=7),
            Metric("F1_r", "F1 relations", headline=True, column=3, heading="F1_r"),
            Metric("rouge_l", "ROUGE-L", column=10, heading="ROU"),
            # MET in the paper's Table 2 is NLTK's METEOR; pycocoevalcap's Java METEOR is meteor_java
            Metric("meteor_nltk", "METEOR (NLTK)", column=11, heading="MET"),
            Metric("meteor_java", "METEOR 1.5 (pycocoevalcap, Java)", column=17, heading="METEOR-J"),
            Metric("cider", "CIDEr-D", high=None, column=12, heading="CID"),
            Metric("bleu4", "BLEU-4", column=13, heading="BL4"),
            Metric("capture_style", "CAPTURE-style", column=14, heading="CAP*"),
            Metric("spice_style", "SPICE-style", column=16, heading="SPI*"),
            Metric("clipscore", "CLIPScore", column=15, heading="CS"),
            Metric("snus_report", report=True),
        ),
        results_module="lmms_scene.metrics.snus.tables",
        scoring_module="lmms_scene.metrics.snus.scoring",
        builder="lmms_scene.data.snus:publish_build",
        # the release's hub location is not published yet: no run is the official benchmark
        release=Release(hub=None, split="test", license="other"),
        n_counts="images",
        resamples="images",
    ),
    Benchmark(
        name="layered_vqa",
        title="Layered-VQA",
        paper="Composition, Not Conversation: VLMs Lose the Scene, Not the Thread",
        paper_file="002_23813883cfdd3a00.txt",
        # one task per delivery schedule, from the one schedule table (stdlib only: a light import)
        tasks=layered_vqa_schedules.TASKS,
        groups=("layered_vqa",),
        sample_tasks=("layered_vqa_sample",),
        data_module="lmms_scene.data.layered_vqa.builder",
        blind_prior="lmms_scene.baselines.layered_vqa:blind_answer",
        docs="docs/layered_vqa.md",
        cli_name="layered-vqa",
        citation=LAYERED_VQA_CITATION,
        metrics=(
            # Table 1's retained accuracy: a schedule family's accuracy over full's (can pass 1);
            # a schedule task holds its part, the group combines them
            *(
                Metric(
                    f"retained_{column}",
                    f"retained accuracy, {column.title()}",
                    high=None,
                    headline=True,
                    group_aggregation=f"group_retained_{column}",
                )
                for column in ("text", "visual", "layered")
            ),
            Metric("accuracy", "final-turn accuracy (every schedule)", headline=True),
            # the report holds it (no harness metric)
            Metric("accuracy_full", "final-turn accuracy under full", headline=True, task=False),
            Metric("empty_output_rate", higher_is_better=False),
            Metric("cannot_tell_rate", higher_is_better=False),
            Metric("layered_vqa_report", report=True),
        ),
        # retained accuracy is relative to the model's own full-schedule accuracy: a model
        # that ignores its input keeps 100% of a poor score. The absolute accuracy over the
        # paper's 16 schedules ranks; full's accuracy and the retained figures stand beside it
        ranking="accuracy",
        results_module="lmms_scene.metrics.layered_vqa.tables",
        scoring_module="lmms_scene.metrics.layered_vqa.scoring",
        # the headline (retained accuracy) compares the 16 schedule tasks: pooled over the group
        pooled=True,
        builder="lmms_scene.data.layered_vqa.builder:publish_build",
        # 93 scenes / 300 questions in the paper; no public location is known yet
        release=Release(hub=None, split="test", license="other"),
        n_counts="questions x schedules",
        resamples="scenes",
    ),
)

#: every task and group name lmms-scene defines starts with one of these (the harness's
#: built-in tasks silently win over ours, so tests check names against its index).
TASK_PREFIXES: tuple[str, ...] = (*(b.name for b in BENCHMARKS), "scene_")


#: the entry-point group through which an installed package registers its benchmarks: each
#: entry point names a :class:`Benchmark` (``module:attribute``)
ENTRY_POINT_GROUP = "lmms_scene.benchmarks"


def register(bench: Benchmark) -> Benchmark:
    """Add ``bench`` to :data:`BENCHMARKS` (the public registration path for a benchmark
    defined outside lmms-scene; docs/architecture.md, "Adding a benchmark"). A name, command-line
    spelling or task name another benchmark already has is a ``ValueError`` naming both;
    registering the same entry again changes nothing. Its modules are checked against
    :mod:`lmms_scene.contract` by tests/test_contract.py, not here (importing them may be heavy)."""
    global BENCHMARKS, TASK_PREFIXES
    if not isinstance(bench, Benchmark):
        raise TypeError(f"register: expected a Benchmark, got {type(bench).__name__}: {bench!r}")
    if bench in BENCHMARKS:
        return bench
    for other in BENCHMARKS:
        clash = {bench.name, bench.cli_name} & {other.name, other.cli_name}
        clash |= set(bench.task_names()) & set(other.task_names())
        if clash:
            raise ValueError(f"register {bench.name!r}: {sorted(clash)} already belong to benchmark {other.name!r}")
    missing = [f for f in ("data_module", "results_module", "scoring_module", "report_key") if not getattr(bench, f)]
    if missing or not bench.headline:
        raise ValueError(f"register {bench.name!r}: no {', '.join(missing) or 'headline'} (docs/architecture.md)")
    BENCHMARKS = (*BENCHMARKS, bench)
    TASK_PREFIXES = (*TASK_PREFIXES[:-1], bench.name, TASK_PREFIXES[-1])
    return bench


def _plugins() -> list[str]:
    """The ``module:attribute`` specs of the benchmarks to register: the entry points of
    :data:`ENTRY_POINT_GROUP`, then ``LMMS_SCENE_BENCHMARKS`` (comma-separated)."""
    return [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)] + settings.benchmark_plugins()


def load_plugins() -> tuple[Benchmark, ...]:
    """Register every benchmark :func:`_plugins` names (an unimportable one is an error naming it)."""
    out = []
    for spec in _plugins():
        module, _, attr = spec.partition(":")
        try:
            bench = getattr(importlib.import_module(module), attr or "BENCHMARK")
        except (ImportError, AttributeError) as err:
            raise ImportError(f"{settings.BENCHMARKS_ENV} / {ENTRY_POINT_GROUP}: cannot load {spec!r}: {err}") from err
        out.append(register(bench))
    return tuple(out)


def names() -> tuple[str, ...]:
    return tuple(b.name for b in BENCHMARKS)


def get(name: str) -> Benchmark:
    """The benchmark called ``name`` (its identifier or command-line spelling)."""
    if not isinstance(name, str):
        raise TypeError(f"benchmark name must be a string, got {type(name).__name__}: {name!r}")
    for bench in BENCHMARKS:
        if name in (bench.name, bench.cli_name):
            return bench
    raise KeyError(f"unknown benchmark {name!r}; lmms-scene has {', '.join(names())}")


def built() -> tuple[Benchmark, ...]:
    """The benchmarks this version ships."""
    return tuple(b for b in BENCHMARKS if b.built())


def resolve(spec: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function (imported on demand)."""
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


# -- which benchmark a task belongs to -------------------------------------------------


def declared_benchmark(config: Mapping[str, Any] | None) -> str | None:
    """The benchmark a task config declares in ``metadata.benchmark`` (or None)."""
    metadata = (config or {}).get("metadata") or {}
    value = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    return str(value) if value else None


def _by_prefix(task: str) -> Benchmark | None:
    # Longest names first, so "layered_vqa_sample" is not read as another benchmark.
    for bench in sorted(BENCHMARKS, key=lambda b: -len(b.name)):
        if task == bench.name or task.startswith(bench.name + "_"):
            return bench
    return None


def benchmark_of_task(task: str, config: Mapping[str, Any] | None = None) -> Benchmark:
    """The benchmark of the task named ``task``.

    In order: the ``metadata.benchmark`` of ``config`` when given; else of the task's YAML
    in the harness's task index (recorded by :mod:`lmms_scene.registration` when the
    harness indexes its tasks, so a user's own task folder counts); else our own task
    names. Raises ``ValueError`` naming the task when none applies.
    """
    declared = declared_benchmark(config) if config is not None else None
    if declared is None:
        declared = declared_benchmark(registration.task_config(task))
    if declared is not None:
        return get(declared)
    bench = _by_prefix(task)
    if bench is not None and task in _our_task_names():
        return bench
    raise ValueError(
        f"task {task!r} declares no lmms-scene benchmark: add `metadata: {{{METADATA_KEY}: <name>}}` "
        f"to its YAML (one of {', '.join(names())}), or build it with `lmms-scene build`"
    )


def _our_task_names() -> set[str]:
    return set(registration.our_task_configs())


load_plugins()
