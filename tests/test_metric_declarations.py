"""Every metric is declared once (``Benchmark.metrics`` in lmms_scene/benchmarks.py), and the
derivation from that declaration is total: each declared task metric is in the task YAML's
``metric_list`` with its direction and aggregation, is a key ``process_results`` returns and
an aggregation its ``utils`` module has; each table metric is a column or figure of its
benchmark's tables with the declared title; the headline and the ranking metric are the
declared ones. A metric the declaration lacks (or one only the declaration has) is named
by :func:`derivation_problems`, which the tests run on the registry as it is and on
declarations with a metric taken out or added."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from conftest import REPO

from lmms_scene import benchmarks
from lmms_scene.benchmarks import Metric
from lmms_scene.metrics.cooco import scoring as cooco_scoring
from lmms_scene.metrics.cooco import tables as cooco_tables
from lmms_scene.metrics.layered_vqa import aggregation as lvqa_aggregation
from lmms_scene.metrics.layered_vqa import tables as lvqa_tables
from lmms_scene.metrics.snus import tables as snus_tables
from lmms_scene.tasks import _generate_metrics as G
from lmms_scene.tasks.layered_vqa import _generate_config as LG

BUILT = [b.name for b in benchmarks.built()]


def _yaml_metrics(bench: benchmarks.Benchmark) -> list[tuple[str, str, bool]]:
    """(metric, aggregation target, higher_is_better) of the first sample task as the harness loads it."""
    from lmms_eval.utils import load_yaml_config

    config = load_yaml_config(str(bench.task_folder / f"{bench.sample_tasks[0]}.yaml"), mode="simple")
    return [
        (e["metric"], getattr(e["aggregation"], "value", e["aggregation"]), e["higher_is_better"])
        for e in config["metric_list"]
    ]


def _returned_keys(name: str) -> tuple[str, ...]:
    """The keys the benchmark's ``process_results`` returns (each task folder's own list)."""
    utils = importlib.import_module(f"lmms_scene.tasks.{name}.utils")
    if name == "cooco":
        return (*cooco_scoring.HEADLINE, cooco_scoring.BREAKDOWN_KEY)
    return tuple(getattr(utils, "METRICS", None) or utils.METRIC_KEYS)


def _table_columns(name: str) -> list[tuple[str, str]]:
    """(metric, title) of every metric column or figure of the benchmark's tables."""
    if name == "cooco":
        return list(cooco_tables.METRICS)
    if name == "snus":
        header = snus_tables.table2([]).header[2:]
        by_heading = {m.column_heading: m.name for m in benchmarks.get("snus").metrics}
        return [(by_heading.get(h, h), h) for h in header]
    return []  # Layered-VQA's tables are per schedule and per retained column, not per metric


def derivation_problems(
    bench: benchmarks.Benchmark,
    yaml_metrics: list[tuple[str, str, bool]],
    returned: tuple[str, ...],
    columns: list[tuple[str, str]],
) -> list[str]:
    """Where what the harness, ``process_results`` and the tables use differs from ``bench``'s
    declaration (empty: every declared metric is where it should be, and nothing else is)."""
    problems = []
    utils = f"lmms_scene.tasks.{bench.name}.utils"
    want = [(m.name, f"{utils}.{m.aggregation or m.name}", m.higher_is_better) for m in bench.task_metrics()]
    for entry in want:
        if entry not in yaml_metrics:
            problems.append(f"{bench.name}: declared task metric {entry} is not in the task YAML's metric_list")
    for entry in yaml_metrics:
        if entry not in want:
            problems.append(f"{bench.name}: task YAML metric {entry} is not declared (or differs from its declaration)")
    if [e[0] for e in yaml_metrics] != [e[0] for e in want] and not problems:
        problems.append(f"{bench.name}: task YAML metric order {[e[0] for e in yaml_metrics]} is not the declaration's")
    declared = [m.name for m in bench.task_metrics()]
    if list(returned) != declared:
        problems.append(f"{bench.name}: process_results returns {list(returned)}, the declaration has {declared}")
    table = [(m.name, m.column_heading) for m in bench.table_metrics()]
    if bench.name != "layered_vqa" and columns != table:
        problems.append(f"{bench.name}: the tables show {columns}, the declaration has {table}")
    if not bench.headline or bench.ranking_metric not in bench.headline:
        problems.append(f"{bench.name}: no headline, or the ranking metric is not one of it")
    if not bench.report_key or bench.report_key not in declared:
        problems.append(f"{bench.name}: its report metric is not declared as a task metric")
    return problems


@pytest.mark.parametrize("name", BUILT)
def test_every_declared_metric_is_where_it_should_be_and_nothing_else(name):
    bench = benchmarks.get(name)
    assert derivation_problems(bench, _yaml_metrics(bench), _returned_keys(name), _table_columns(name)) == []
    # every aggregation the YAML names exists (the harness resolves it by name)
    utils = importlib.import_module(f"lmms_scene.tasks.{name}.utils")
    for m in bench.task_metrics():
        assert callable(getattr(utils, m.aggregation or m.name)), (name, m.name)


@pytest.mark.parametrize("name", BUILT)
def test_a_metric_left_out_of_or_added_to_the_declaration_is_named(name):
    bench = benchmarks.get(name)
    found = (_yaml_metrics(bench), _returned_keys(name), _table_columns(name))
    # a task metric the declaration lacks: the YAML and process_results still have it
    dropped = next(m for m in bench.task_metrics() if not m.report and not m.headline)
    fewer = dataclasses.replace(bench, metrics=tuple(m for m in bench.metrics if m is not dropped))
    problems = derivation_problems(fewer, *found)
    assert any(dropped.name in p and "not declared" in p for p in problems), problems
    # a metric only the declaration has
    more = dataclasses.replace(bench, metrics=(*bench.metrics, Metric("undeclared_elsewhere", column=None)))
    assert any("undeclared_elsewhere" in p for p in derivation_problems(more, *found))
    # a direction flipped in the declaration only
    flipped = dataclasses.replace(
        bench,
        metrics=tuple(
            dataclasses.replace(m, higher_is_better=not m.higher_is_better) if m is bench.headline[0] else m
            for m in bench.metrics
        ),
    )
    assert any(bench.headline[0].name in p for p in derivation_problems(flipped, *found))


def test_a_table_column_or_title_not_declared_is_named():
    bench = benchmarks.get("cooco")
    found = (_yaml_metrics(bench), _returned_keys("cooco"))
    retitled = [(k, t + " (copied)") if k == "accuracy" else (k, t) for k, t in _table_columns("cooco")]
    assert any("the tables show" in p for p in derivation_problems(bench, *found, retitled))


def test_the_templates_metric_lists_are_what_the_generator_writes(tmp_path):
    assert G.stale() == [], f"regenerate with: {G.COMMAND}"
    # a metric added to a template by hand (not declared) makes it stale, naming the file
    for name in BUILT:
        (tmp_path / name).mkdir()
        (tmp_path / name / G.TEMPLATE).write_bytes((REPO / "tasks" / name / G.TEMPLATE).read_bytes())
    path = tmp_path / "snus" / G.TEMPLATE
    text = path.read_text()
    path.write_text(
        text.replace(G.END, "  - metric: extra\n    aggregation: mean\n    higher_is_better: true\n" + G.END)
    )
    assert G.stale(tmp_path) == ["snus/_default_template_yaml: differs"]
    assert G.main(["--out", str(tmp_path), "--check"]) == 1
    G.write(tmp_path)
    assert G.stale(tmp_path) == [] and path.read_text() == text
    # a template without its generated block is refused, naming the file
    path.write_text(text.replace(G.END, ""))
    assert "snus/_default_template_yaml: needs exactly one generated block" in G.stale(tmp_path)[0]
    with pytest.raises(ValueError, match="needs exactly one generated block"):
        G.write(tmp_path)


def test_the_layered_vqa_group_aggregates_the_declared_group_metrics():
    bench = benchmarks.get("layered_vqa")
    group = LG.render()["layered_vqa.yaml"]
    listed = [line.split(": ", 1)[1] for line in group.splitlines() if line.startswith("  - metric: ")]
    assert listed == [m.name for m in bench.metrics if m.group_aggregation] == list(lvqa_tables.HEADLINE)
    # the code's retained columns are the declared ones (Table 1's Text / Visual / Layered)
    assert [f"retained_{c}" for c in lvqa_aggregation.RETAINED_COLUMNS] == listed


def test_the_declaration_refuses_a_twice_declared_metric_a_second_report_and_gapped_columns():
    bench = benchmarks.get("cooco")
    with pytest.raises(ValueError, match="declared twice.*accuracy"):
        dataclasses.replace(bench, metrics=(*bench.metrics, Metric("accuracy")))
    with pytest.raises(ValueError, match="more than one report"):
        dataclasses.replace(bench, metrics=(*bench.metrics, Metric("another_report", report=True)))
    with pytest.raises(ValueError, match="same table column"):
        dataclasses.replace(bench, metrics=(*bench.metrics, Metric("second_column_0", column=0)))
    with pytest.raises(ValueError, match="ranking metric 'nope'"):
        dataclasses.replace(bench, ranking="nope")
    assert benchmarks.get("snus").metric("F1_o").column_heading == "F1_o"
    with pytest.raises(KeyError, match="no metric 'nope'"):
        bench.metric("nope")


def test_the_generators_share_one_command_line(tmp_path, capsys):
    """Both generators run through tasks/_generator_cli.py: --check names every stale file
    under --out and the command, exit 1; without it, write and say what was written."""
    from lmms_scene.tasks import _generator_cli

    calls = []

    def run(argv, problems):
        return _generator_cli.main(
            argv,
            command="python -m gen",
            doc="Write things.\n\nMore.",
            default=tmp_path,
            what="folder",
            stale=lambda out: calls.append(("stale", out)) or problems,
            write=lambda out: calls.append(("write", out)) or [out / "a.yaml"],
            wrote=lambda written, out: f"wrote {len(written)} into {out}",
        )

    assert run(["--check"], ["a.yaml: differs"]) == 1 and calls == [("stale", tmp_path)]
    err = capsys.readouterr().err
    assert f"stale: {tmp_path / 'a.yaml: differs'}" in err and "regenerate with: python -m gen" in err
    assert run(["--out", str(tmp_path / "x"), "--check"], []) == 0 and capsys.readouterr().err == ""
    assert run([], []) == 0 and calls[-1] == ("write", tmp_path)
    assert capsys.readouterr().out == f"wrote 1 into {tmp_path}\n"
