"""docs/reliability.md stays true: each benchmark's table has at least 25 bad inputs, and
every test a row names exists (a row ``...[case]`` names a case of the test above it)."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

DOC = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
BENCHMARKS = ("SNUS", "Layered-VQA", "COOCO", "Pfram")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", DOC, flags=re.MULTILINE | re.DOTALL)
    assert match, f"no section {title!r}"
    return match.group(1)


def rows(title: str) -> list[str]:
    return [line for line in section(title).splitlines() if re.match(r"^\| \d+(-\d+)? \|", line)]


@pytest.mark.parametrize("title", BENCHMARKS)
def test_every_benchmark_lists_at_least_25_bad_inputs_each_with_a_test(title):
    table = rows(title)
    assert len(table) >= 25, f"{title}: {len(table)} rows"
    current = None
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 4 and all(cells), line
        names = re.findall(r"`(?:(test_[a-z0-9_]+\.py)::)?(test_[a-z0-9_]+)", cells[3])
        if not names:
            assert cells[3].startswith("`...[") and current, line  # a case of the test above
            continue
        for file, test in names:
            if file:
                current = file
            assert current, line
            assert re.search(rf"^def {test}\(", (REPO / "tests" / current).read_text(encoding="utf-8"), re.MULTILINE), (current, test)


def test_the_sections_for_the_other_parts_of_issue_16_come_last():
    titles = re.findall(r"^## (.+)$", DOC, flags=re.MULTILINE)
    assert titles[-2:] == ["Judging, replays and faults", "Results, submissions and the leaderboard"]
    assert all(t in titles for t in BENCHMARKS)
