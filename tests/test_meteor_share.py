"""tests/meteor_share.py: the run's one METEOR JVM answers exactly as a JVM of the process's
own, for several clients at once, and every other ``java`` call reaches the real java."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import meteor_share
import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get(meteor_share.SOCKET_ENV),
        reason="no shared METEOR in this run (LMMS_SCENE_TEST_METEOR=0, or no java on this machine)",
    ),
]

REFERENCES = [
    ["There is no hard hat on the worker at the left.", "The left worker wears no helmet."],
    ["No guardrail along the edge of the scaffold.", "The scaffold has no railing."],
    ["Nobody wears gloves near the saw.", "The men at the saw have bare hands."],
    ["A ladder without a spotter.", "No one holds the ladder."],
]
HYPOTHESES = [
    ["The worker on the left has no helmet.", "a helmet is worn", "no hard hat"],
    ["There is no railing on the scaffold.", "the guardrail is there", "no guard rail at all"],
    ["No gloves are worn by the men near the saw.", "gloves on", "bare hands, no gloves"],
    ["Nobody is holding the ladder.", "a spotter holds it", "the ladder has no spotter"],
]


def _corpus(k: int) -> tuple[dict, dict]:
    gts = {i: refs for i, refs in enumerate(REFERENCES)}
    res = {i: [HYPOTHESES[i][(i + k) % 3]] for i in range(len(REFERENCES))}
    return gts, res


def _meteor(path_dir: str | None = None):
    from pycocoevalcap.meteor.meteor import Meteor

    old = os.environ["PATH"]
    if path_dir is not None:
        os.environ["PATH"] = path_dir
    try:
        return Meteor()
    finally:
        os.environ["PATH"] = old


def _close(m) -> None:
    m.meteor_p.stdin.close()
    m.meteor_p.wait(timeout=60)


def test_the_shared_jvm_scores_as_a_jvm_of_its_own_for_several_clients(tmp_path):
    real = os.environ[meteor_share.REAL_ENV]
    own_bin = tmp_path / "bin"
    own_bin.mkdir()
    (own_bin / "java").symlink_to(real)
    own = _meteor(str(own_bin))  # a JVM of this process's own, as without the shim
    expected = [own.compute_score(*_corpus(k)) for k in range(3)]
    _close(own)
    assert len({round(score, 9) for score, _ in expected}) == 3  # three different corpora

    shared = [_meteor() for _ in range(3)]  # PATH's java: the shim
    got: dict[int, list] = {}

    def score(k: int) -> None:
        got[k] = [shared[k].compute_score(*_corpus(k)) for _ in range(5)]

    threads = [threading.Thread(target=score, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for k in range(3):
        assert got[k] == [expected[k]] * 5, k
    for m in shared:  # each answered through a relay (the shim's python), not a JVM of its own
        assert Path(f"/proc/{m.meteor_p.pid}/exe").resolve() != Path(real).resolve()
    for m in shared:
        _close(m)
        assert m.meteor_p.returncode == 0


def test_a_client_that_goes_away_mid_line_leaves_the_others_in_step():
    gts, res = _corpus(0)
    first = _meteor()
    expected = first.compute_score(gts, res)
    gone = _meteor()
    gone.meteor_p.stdin.write(b"SCORE ||| a half")  # no newline: a cut line
    gone.meteor_p.stdin.flush()
    gone.meteor_p.kill()
    gone.meteor_p.wait(timeout=60)
    assert first.compute_score(gts, res) == expected
    _close(first)


def test_other_java_calls_reach_the_real_java():
    real = os.environ[meteor_share.REAL_ENV]
    via_shim = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    direct = subprocess.run([real, "-version"], capture_output=True, text=True, timeout=60)
    assert via_shim.returncode == direct.returncode == 0
    assert via_shim.stderr == direct.stderr and "version" in direct.stderr
    assert meteor_share._is_meteor(["-jar", "-Xmx2G", "meteor-1.5.jar", "-", "-", "-stdio", "-l", "en", "-norm"])
    assert not meteor_share._is_meteor(["-jar", "stanford-corenlp-3.4.1.jar", "-stdio"])
    assert not meteor_share._is_meteor(["-jar", "meteor-1.5.jar", "ref.txt", "hyp.txt"])
