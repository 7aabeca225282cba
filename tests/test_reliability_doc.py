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
            assert re.search(rf"^def {test}\(", (REPO / "tests" / current).read_text(encoding="utf-8"), re.MULTILINE), (
                current,
                test,
            )


def test_the_sections_for_the_other_parts_of_issue_16_come_last():
    titles = re.findall(r"^## (.+)$", DOC, flags=re.MULTILINE)
    assert titles[-2:] == ["Judging, replays and faults", "Results, submissions and the leaderboard"]
    assert all(t in titles for t in BENCHMARKS)


# -- the table at the top: every probe counted by outcome ------------------------------------------

#: the outcome of a probe, from the words of its "what it gets" cell, checked in this order
OUTCOMES = (
    ("not covered", re.compile(r"\bnot covered\b")),
    (
        "refused",
        re.compile(
            r"\b(refused|refuses|exit [12]|exits? non-zero|errors?|stops?|fails before|expected|not JSON|not UTF-8|duplicate|"
            r"repeated|appears more than once|nothing to evaluate)\b"
        ),
    ),
    (
        "recorded",
        re.compile(
            r"\b(unscored|recorded|records|stand-in|counted|unparsed|not computed|not graded|cut|skipped|reported|says|said so|"
            r"notice|note|flagged|ungraded|warning|dropped|replaced)\b"
        ),
    ),
)
OUTCOME_NAMES = ("refused", "recorded", "handled", "not covered")


def outcome(cell: str) -> str:
    """``refused`` (a clear error: nothing scored), ``recorded`` (kept and marked as what it
    is: unscored, cut, counted), ``not covered`` (documented), else ``handled`` (the input
    is read as meant)."""
    for name, pattern in OUTCOMES:
        if pattern.search(cell):
            return name
    return "handled"


def probes() -> dict[str, list[str]]:
    """Section -> the "what it gets" cell of every row of its tables whose last column is the test."""
    out: dict[str, list[str]] = {}
    for match in re.finditer(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", DOC, flags=re.MULTILINE | re.DOTALL):
        cells, in_table = [], False
        for line in match.group(2).splitlines():
            if not line.startswith("|"):
                in_table = False
                continue
            parts = [c.strip() for c in line.strip().strip("|").split("|")]
            if parts[-1] == "test":
                in_table = True
                continue
            if in_table and not set(line) <= set("|- "):
                cells.append(parts[-2])
        if cells:
            out[match.group(1)] = cells
    return out


def counts_table() -> str:
    rows = ["| section | " + " | ".join(OUTCOME_NAMES) + " | probes |", "|---|" + "---|" * (len(OUTCOME_NAMES) + 1)]
    total = dict.fromkeys(OUTCOME_NAMES, 0)
    for title, cells in probes().items():
        got = [outcome(c) for c in cells]
        for name in OUTCOME_NAMES:
            total[name] += got.count(name)
        rows.append(f"| {title} | " + " | ".join(str(got.count(n)) for n in OUTCOME_NAMES) + f" | {len(cells)} |")
    rows.append(
        "| **all** | " + " | ".join(f"**{total[n]}**" for n in OUTCOME_NAMES) + f" | **{sum(total.values())}** |"
    )
    return "\n".join(rows)


def test_the_table_at_the_top_counts_every_probe_by_outcome():
    top = DOC.split("\n## ", 1)[0]
    assert counts_table() in top, "the table at the top of docs/reliability.md should read:\n" + counts_table()


def test_the_outcome_rule_reads_cells_as_meant():
    assert outcome("refused: `row 1 (/etc/passwd)`") == "refused"
    assert outcome("exit 2 before the model loads") == "refused"
    assert outcome("unscored: `no model output for this doc`") == "recorded"
    assert outcome("scored on its first 20,000 characters; `cut at 20000 of 90000 characters`") == "recorded"
    assert outcome("scored; the same rows as one thread") == "handled"
    assert outcome("not covered: lmms-eval writes nothing before the end") == "not covered"


def test_every_test_named_outside_the_benchmark_tables_exists():
    for title, _cells in probes().items():
        if title in BENCHMARKS:
            continue
        for file, test in re.findall(r"`(?:tests/)?(test_[a-z0-9_]+\.py)::(test_[a-z0-9_]+)", section(title)):
            assert re.search(rf"^def {test}\(", (REPO / "tests" / file).read_text(encoding="utf-8"), re.MULTILINE), (
                file,
                test,
            )
