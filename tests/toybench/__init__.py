"""ToyBench: a fourth benchmark defined entirely under tests/, the proof that the benchmark
contract (lmms_scene/contract.py) is enough: nothing under lmms_scene/ names it.

A yes/no question about one coloured shape per image ("Is the shape red?"), scored by
accuracy. Its parts, one file each (docs/architecture.md, "Adding a benchmark"):

- :data:`BENCHMARK`: the registry entry, registered through the public path
  (``LMMS_SCENE_BENCHMARKS=toybench:BENCHMARK``, or :func:`lmms_scene.benchmarks.register`);
- :mod:`toybench.data`: the data module (schema, sample, load-time checks, card, local build, publish);
- :mod:`toybench.scoring`: the scoring module (its own yes/no reader, one scored row per item, the report);
- :mod:`toybench.tables`: the results module (what show, report and submissions read);
- :mod:`toybench.prior`: the blind prior ``scene_blind`` answers with;
- ``tasks/``: the task YAML, its ``utils.py`` (the harness hooks) and the data file.
"""

from __future__ import annotations

from pathlib import Path

from lmms_scene.benchmarks import Benchmark, Metric, Release

#: the fingerprint of tasks/data/toybench.parquet as its task scores it (tests/test_toybench.py
#: recomputes it from the file): the registry vouches for this data, as for an official release
FINGERPRINT = "43adae904526912377aaab2355973c4d6fda8edcdb177e9d4e7aa0825927bb22"

BENCHMARK = Benchmark(
    name="toybench",
    title="ToyBench",
    paper="lmms-scene's test benchmark (no paper): is the shape of the named colour?",
    paper_file="",
    tasks=("toybench",),
    groups=(),
    sample_tasks=(),
    data_module="toybench.data",
    blind_prior="toybench.prior:blind_answer",
    docs="tests/toybench/__init__.py",
    cli_name="toybench",
    # every metric declared once (docs/architecture.md): the task YAML's metric_list, the
    # submission's headline and the report dict the tables read come from this list
    metrics=(
        Metric("accuracy", "yes/no accuracy", headline=True),
        Metric("toybench_report", report=True),
    ),
    results_module="toybench.tables",
    scoring_module="toybench.scoring",
    builder="toybench.data:publish_build",
    release=Release(hub=None, split="test", license="cc0-1.0", fingerprints={"toybench": (FINGERPRINT,)}),
    n_counts="questions",
    resamples="questions",
    # its tasks live beside it, not under lmms-scene's tasks/ (the registry's task_folder)
    task_dir=str(Path(__file__).resolve().parent / "tasks"),
)
