"""What the local-build round trips share (tests/test_local_build.py, tests/test_cooco_runs.py):
run the blind-baseline command ``lmms-scene build`` printed, exactly as printed but for its
results folder, and ``lmms-scene show`` on what it wrote."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conftest import run_python


def printed_command(stdout: str, heading: str = "the blind baseline") -> str:
    """The command on the line after the printed line starting with ``heading``."""
    lines = stdout.splitlines()
    return next(lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith(heading))


def run_printed_baseline(
    stdout: str, cwd: Path, env: Mapping[str, str], extra: Sequence[str] = ()
) -> tuple[list[str], Any, Path]:
    """Run the printed blind-baseline command (``results/`` swapped for ``cwd/results``, plus
    ``extra`` and ``--verbosity DEBUG``); returns (its argv as printed, the finished process,
    the results folder)."""
    argv = shlex.split(printed_command(stdout))
    results_dir = Path(cwd) / "results"
    swapped = [a if a != "results/" else str(results_dir) for a in argv]
    run = run_python(
        [sys.executable, "-m", "lmms_scene.cli", *swapped[1:], *extra, "--verbosity", "DEBUG"],
        check=False,
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=600,
        cwd=cwd,
    )
    return argv, run, results_dir


def show(results_dir: Path, cwd: Path, env: Mapping[str, str]) -> Any:
    """``lmms-scene show RESULTS`` run as a user runs it (the finished process)."""
    return run_python(
        [sys.executable, "-m", "lmms_scene.cli", "show", str(results_dir)],
        check=False,
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=300,
        cwd=cwd,
    )
