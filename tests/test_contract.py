"""The benchmark contract (lmms_scene/contract.py), checked over EVERY registered benchmark:
the parameters come from the registry, so a new benchmark is checked with no edit here.

The toy benchmark under tests/toybench/ is registered through the public path
(:func:`lmms_scene.benchmarks.register`) for the test that checks it, then taken out again.
"""

from __future__ import annotations

import inspect
import types

import pytest

from lmms_scene import benchmarks, contract

TOY = "toybench"


def _registered() -> list[str]:
    return [*benchmarks.names(), *([] if TOY in benchmarks.names() else [TOY])]


@pytest.fixture
def bench(request, monkeypatch):
    """The registry entry called ``request.param``; the toy is registered for this test only."""
    if request.param == TOY and TOY not in benchmarks.names():
        import toybench

        monkeypatch.setattr(benchmarks, "BENCHMARKS", benchmarks.BENCHMARKS)
        monkeypatch.setattr(benchmarks, "TASK_PREFIXES", benchmarks.TASK_PREFIXES)
        benchmarks.register(toybench.BENCHMARK)
    return benchmarks.get(request.param)


pytestmark = pytest.mark.parametrize("bench", _registered(), indirect=True)


def test_the_data_module_keeps_the_contract(bench):
    assert isinstance(bench.data(), contract.DataModule)
    assert contract.problems(bench.data(), contract.DataModule) == []


def test_the_scoring_module_keeps_the_contract(bench):
    assert contract.problems(bench.scoring(), contract.ScoringModule) == []


def test_the_results_module_keeps_the_contract_with_its_declared_optional_parts(bench):
    mod = bench.results()
    protocol = contract.PooledResultsModule if bench.pooled else contract.ResultsModule
    assert contract.problems(mod, protocol) == []
    # declared in the registry, never discovered: a results module has the pooled part
    # exactly when its entry says so, and no flag of its own
    assert hasattr(mod, "group_summary") == bench.pooled, bench.name
    assert not hasattr(mod, "POOLED"), f"{mod.__name__}.POOLED: declare it as the registry entry's `pooled`"


def test_the_registry_entry_agrees_with_its_modules(bench):
    mod, scoring = bench.results(), bench.scoring()
    assert mod.REPORT_KEY == bench.report_key
    assert tuple(mod.ITEM_FIELDS) == tuple(scoring.ITEM_FIELDS)
    assert tuple(mod.DATA_FIELDS) == tuple(scoring.DATA_FIELDS)
    assert bench.headline and bench.ranking_metric in bench.headline
    # publish runs the data module's own builder
    assert bench.builder and benchmarks.resolve(bench.builder) is bench.data().publish_build
    prior = benchmarks.resolve(bench.blind_prior)
    assert list(inspect.signature(prior).parameters)[:2] == ["doc", "prompt"]
    if bench.prescore:
        assert callable(benchmarks.resolve(bench.prescore))


def test_a_module_that_breaks_the_contract_is_named_member_by_member(bench):
    # the check itself: a copy of the real data module with one member gone, one renamed
    # parameter and one parameter without its default is caught, each named
    real = bench.data()
    broken = types.ModuleType("broken_data")
    broken.__dict__.update({k: getattr(real, k) for k in contract.members(contract.DataModule)})
    del broken.loaded_row_problem
    broken.card = lambda dataset, origin, notes=(): ""
    broken.write_local = lambda dataset, out, card, name: {}
    found = contract.problems(broken, contract.DataModule)
    assert len(found) == 3, found
    assert "broken_data: no 'loaded_row_problem' (DataModule)" in found
    assert any("card" in p and "parameter 2 is 'origin', the contract's is 'source'" in p for p in found)
    assert any("write_local" in p and "parameter 'name' needs a default" in p for p in found)
