"""A full disk end to end (issue 32): ``lmms-scene eval`` whose results and samples files
cannot be written in full exits non-zero naming what is missing, where the outputs are and
the command that scores them, and that command scores them from the journal.

The disk is full only for this run's writes under its ``--output_path`` (tests/full_disk.py
fails them with ENOSPC after a byte budget); the journal fills first on a real disk, so it
is left whole."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, find_results, find_samples, harness_env, run_python

from lmms_scene import journal as J

pytestmark = pytest.mark.e2e

ENV = {"LMMS_SCENE_CLIP_MODEL": "none"}
TASK = "layered_vqa_sample"


def test_a_full_disk_run_exits_non_zero_and_its_outputs_are_rescored_from_the_journal(tmp_path):
    out = tmp_path / "run"
    # ``python -m full_disk`` with tests/ on PYTHONPATH: the fork server runs it in a fork of
    # its pre-imported interpreter, as it runs lmms_eval (conftest.py's run_python)
    cmd = [
        sys.executable,
        "-m",
        "full_disk",
        str(out),
        "3000",
        "eval",
        "--model",
        "scene_blind",
        "--tasks",
        TASK,
        "--limit",
        "4",
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "WARNING",
    ]
    env = harness_env({**ENV, "PYTHONPATH": str(REPO / "tests")})
    run = run_python(cmd, env=env, cwd=tmp_path, timeout=900)
    log = run.stdout + run.stderr
    assert run.returncode == 1, log[-3000:]
    assert "Traceback" not in log
    (results,) = out.glob("*_results.json")
    assert results.stat().st_size == 3000  # the harness's results JSON, cut where the disk filled
    (journal_file,) = (out / J.FOLDER).glob("*.jsonl")
    (line,) = [x for x in run.stderr.splitlines() if x.startswith("lmms-scene eval: the run is not finished")]
    assert f"{results} is cut short or unreadable (3000 bytes" in line
    assert f"_samples_{TASK}.jsonl holds 0 of 4 rows" in line
    assert f"the 4 outputs are in {journal_file}" in line
    command = re.search(r"score them with (lmms-scene rescore \S+ --output_path \S+)$", line).group(1).split()
    assert command[2] == str(journal_file)
    # the exact command it printed scores the journaled outputs
    done = run_python(
        [sys.executable, "-m", "lmms_scene.cli", *command[1:]], env=harness_env(ENV), cwd=tmp_path, timeout=900
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rescored = Path(command[-1])
    assert find_results(rescored)["results"][TASK]["layered_vqa_report,none"]["n_rows"] == 4
    outputs = {
        json.loads(x)["doc_id"]: json.loads(x)["output"]
        for x in journal_file.read_text().splitlines()
        if '"kind": "output"' in x
    }
    rows = find_samples(rescored, TASK)
    assert sorted(s["doc_id"] for s in rows) == [0, 1, 2, 3] and len(outputs) == 4
