"""The fourth benchmark as proof (issue 34): ToyBench, defined entirely under tests/toybench/,
registers through the public path with no file under lmms_scene/ naming it, keeps the
contract (tests/test_contract.py runs over it), runs through the harness with the blind
model and appears in ``show``, the report and a submission."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import toybench
from toybench import data, scoring

from lmms_scene import benchmarks, settings

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


@pytest.fixture
def registered(monkeypatch):
    """ToyBench registered for one test through ``LMMS_SCENE_BENCHMARKS`` (the registry restored after)."""
    monkeypatch.setattr(benchmarks, "BENCHMARKS", benchmarks.BENCHMARKS)
    monkeypatch.setattr(benchmarks, "TASK_PREFIXES", benchmarks.TASK_PREFIXES)
    monkeypatch.setenv(settings.BENCHMARKS_ENV, "toybench:BENCHMARK")
    assert benchmarks.load_plugins() == (toybench.BENCHMARK,)
    return benchmarks.get("toybench")


def test_nothing_under_the_package_names_the_toy():
    named = [
        str(p.relative_to(REPO))
        for root in ("lmms_scene", "tasks")
        for p in (REPO / root).rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".yaml", ".jinja", ".md", "")
        and "toybench" in p.read_text(errors="replace")
    ]
    assert named == []


def test_the_env_registers_it_and_the_registry_finds_its_tasks(registered):
    assert "toybench" in benchmarks.names() and registered.title == "ToyBench"
    assert benchmarks.benchmark_of_task("toybench_mine", {"metadata": {"benchmark": "toybench"}}) is registered
    assert "toybench" in benchmarks.TASK_PREFIXES
    # registering it again changes nothing; a clash is named with the benchmark it clashes with
    assert benchmarks.register(toybench.BENCHMARK) is toybench.BENCHMARK and benchmarks.names().count("toybench") == 1
    from dataclasses import replace

    with pytest.raises(ValueError, match=r"register 'toy2': \['cooco'\] already belong to benchmark 'cooco'"):
        benchmarks.register(replace(toybench.BENCHMARK, name="toy2", cli_name="cooco", tasks=("toy2",)))
    with pytest.raises(ValueError, match="no scoring_module"):
        benchmarks.register(replace(toybench.BENCHMARK, name="toy3", cli_name="toy3", tasks=(), scoring_module=""))


def test_its_task_yaml_lists_the_declared_metrics():
    """The toy's YAML is hand-written (its hooks live under tests/, not in the generator's
    tasks/<bench>/utils.py), so this is its currency check: the metric_list names, in order,
    with direction, are the registry entry's task metrics."""
    import yaml

    text = (TESTS / "toybench" / "tasks" / "toybench.yaml").read_text()
    listed = yaml.load(re.sub(r"!function ", "", text), Loader=yaml.SafeLoader)["metric_list"]
    declared = toybench.BENCHMARK.task_metrics()
    assert [(m["metric"], m["higher_is_better"]) for m in listed] == [(m.name, m.higher_is_better) for m in declared]
    assert toybench.BENCHMARK.report_key == "toybench_report"
    assert [m.name for m in toybench.BENCHMARK.headline] == ["accuracy"]


def test_a_spec_that_does_not_load_is_named(monkeypatch):
    monkeypatch.setattr(benchmarks, "BENCHMARKS", benchmarks.BENCHMARKS)
    monkeypatch.setenv(settings.BENCHMARKS_ENV, "toybench:NO_SUCH")
    with pytest.raises(
        ImportError, match="LMMS_SCENE_BENCHMARKS / lmms_scene.benchmarks: cannot load 'toybench:NO_SUCH'"
    ):
        benchmarks.load_plugins()


def test_its_data_is_what_its_generator_writes_and_what_the_registry_vouches_for(tmp_path):
    from datasets import Dataset

    shipped = Dataset.from_parquet(str(data.TASKS / data.DATA_FILE))
    (again,) = data.build_sample(tmp_path)
    assert Dataset.from_parquet(str(again)).to_list() == shipped.to_list()
    rows = [scoring.score_doc(d, "yes") for d in data.ensure_schema(shipped)]
    assert scoring.report(rows)["dataset"]["fingerprint"] == toybench.FINGERPRINT
    assert toybench.BENCHMARK.release.fingerprints == {"toybench": (toybench.FINGERPRINT,)}


def test_a_bad_row_is_named_and_stood_in_for():
    from datasets import Dataset

    rows = data.sample_rows()
    rows[3]["answer"] = "maybe"
    ds = Dataset.from_list(rows, features=data.features())
    assert (
        data.loaded_row_problem(rows[3], 3)
        == "ToyBench row 3 (toy03): field 'answer': expected one of ['yes', 'no'], got 'maybe'"
    )
    with pytest.warns(UserWarning):
        checked = data.ensure_schema(ds)
    row = scoring.score_doc(checked[3], "no")
    assert row["scored"] is False and "field 'answer'" in row["unscored_reason"]


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ("Yes, it is red.", "yes"),
        ("no.", "no"),
        ("  NOPE", "no"),
        ("It is red.", None),
        ("", None),
        ("Yesterday it was blue", None),
    ],
)
def test_the_toy_reader(reply, read):
    assert scoring.read_yes_no(reply) == read


@pytest.mark.e2e
@pytest.mark.slow
def test_the_toy_runs_through_the_harness_and_shows_everywhere(run_lmms_eval, registered, tmp_path):
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "toybench"],
        env={settings.BENCHMARKS_ENV: "toybench:BENCHMARK", "PYTHONPATH": str(TESTS)},
        include=data.TASKS,
        timeout=300,
    )
    assert code == 0, log[-3000:]
    res = results["results"]["toybench"]
    # the blind prior says "Yes." to every question: right on the four true ones of eight
    assert res["accuracy,none"] == 0.5
    assert res["toybench_report,none"]["model"]["counts"] == {"n": 8, "n_scored": 8, "n_empty": 0, "n_unreadable": 0}

    from lmms_scene.report import submission as S
    from lmms_scene.report.html import build_report
    from lmms_scene.report.text import show_text

    text, status = show_text([out])
    assert status == 0 and "ToyBench: yes/no accuracy" in text, text
    assert re.search(r"scene_blind \(toybench\)\s*\|\s*0\.500", text), text
    info = build_report([out], tmp_path / "report" / "report.html")
    assert "toybench" in info.benchmarks
    assert "ToyBench: yes/no accuracy" in (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    sub = S.build(out)
    entry = sub["benchmarks"]["toybench"]
    assert entry["metrics"]["accuracy"]["value"] == 0.5 and entry["dataset"]["official"] is True
    assert S.verify(sub) == []
