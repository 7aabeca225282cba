"""The one door to lmms-eval (lmms_scene/compat.py): every touch point still holds against
the installed harness (a failure names it), nothing outside compat imports the harness,
and the typed request and the one conversation loop behave as the harness expects."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_scene import compat, compat_check

REPO = Path(__file__).resolve().parents[1]

#: harness imports that stay outside compat, each with why (the lead switches them over)
ALLOWED: set[str] = set()


@pytest.mark.slow
@pytest.mark.parametrize("name", [tp.name for tp in compat_check.TOUCH_POINTS])
def test_touch_point_holds(name):
    problems = compat_check.check(name)
    assert problems == [], "\n".join(problems)


def test_every_touch_point_has_a_unique_name_and_verified_versions():
    names = [tp.name for tp in compat_check.TOUCH_POINTS]
    assert len(names) == len(set(names))
    assert all(tp.verified and tp.touches and tp.used_by for tp in compat_check.TOUCH_POINTS)
    assert compat.installed_version() in compat.VERIFIED_VERSIONS  # the gate: this environment is a verified one


def test_a_broken_touch_point_is_reported_by_name(monkeypatch):
    import lmms_eval.utils as harness_utils

    monkeypatch.delattr(harness_utils, "get_git_branch_name")
    monkeypatch.setattr(compat, "installed_version", lambda: "9.9.9")
    problems = compat_check.check("version-functions")
    assert len(problems) == 1
    assert "'version-functions'" in problems[0] and "get_git_branch_name" in problems[0]
    assert "verified on 0.7.3; installed lmms-eval 9.9.9" in problems[0]
    with pytest.raises(compat_check.HarnessChanged, match="version-functions"):
        compat_check.require("version-functions")
    with pytest.raises(KeyError, match="no lmms-eval touch point 'nope'"):
        compat_check.check("nope")


def test_importing_compat_loads_no_harness():
    code = "import sys, lmms_scene.compat, lmms_scene.registration, lmms_scene.harness, lmms_scene.journal; print(sorted(m for m in sys.modules if m.startswith('lmms_eval')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


IMPORT = re.compile(r"^\s*(from\s+lmms_eval[\s.]|import\s+lmms_eval\b)|import_module\(\s*[\"']lmms_eval", re.M)


def test_no_harness_import_outside_compat():
    offenders = []
    for folder in ("lmms_scene", "tasks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "lmms_scene/compat.py" or rel in ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if IMPORT.search(line):
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == [], "import lmms-eval through lmms_scene.compat:\n" + "\n".join(offenders)


def test_the_allowed_list_is_not_stale():
    for rel in ALLOWED:
        assert IMPORT.search((REPO / rel).read_text(encoding="utf-8")), (
            f"{rel} no longer imports lmms_eval: drop it from ALLOWED"
        )


# -- the typed request ------------------------------------------------------------------------


def _visual(doc):
    return ["img"]


def _text(doc, **kw):
    return None


def _messages(doc, **kw):
    return []


@pytest.mark.parametrize(
    ("args", "chat", "multi_round", "expected"),
    [
        (
            ("ctx", {"max_new_tokens": 4}, _visual, 3, "t", "test"),
            False,
            False,
            {"doc_to_visual": _visual, "doc_to_text": None},
        ),
        (
            ("ctx", {"max_new_tokens": 4}, _visual, _text, 3, "t", "test"),
            False,
            True,
            {"doc_to_visual": _visual, "doc_to_text": _text},
        ),
        (("ctx", _messages, {"max_new_tokens": 4}, 3, "t", "test"), True, True, {"doc_to_messages": _messages}),
    ],
)
def test_generation_request_names_each_layout(args, chat, multi_round, expected):
    req = compat.GenerationRequest.from_args(args, chat=chat, multi_round=multi_round)
    assert (req.context, req.gen_kwargs, req.doc_id, req.task, req.split, req.chat) == (
        "ctx",
        {"max_new_tokens": 4},
        3,
        "t",
        "test",
        chat,
    )
    for field, value in expected.items():
        assert getattr(req, field) is value
    if not multi_round or chat:  # single-round layouts round-trip to the harness's positions
        assert req.as_args() == args


def test_generation_request_of_a_harness_instance():
    request = compat.make_request(
        "generate_until", ("ctx", {}, _visual, 0, "t", "test"), {"task": "t", "doc_id": 0, "repeats": 1}
    )
    assert type(request) is compat.request_class()
    req = compat.GenerationRequest.of(request, chat=False, multi_round=False)
    assert (req.doc_id, req.task, req.doc_to_visual) == (0, "t", _visual)
    with pytest.raises(ValueError):  # a multi-round layout is not a single-round one
        compat.GenerationRequest.of(request, chat=False, multi_round=True)


# -- the one conversation loop ------------------------------------------------------------------


def test_one_max_rounds_for_every_model():
    from lmms_scene.models import _base, replay

    assert replay.MAX_ROUNDS is _base.MAX_ROUNDS
    sources = [p.read_text(encoding="utf-8") for p in (REPO / "lmms_scene" / "models").glob("*.py")]
    assert sum(len(re.findall(r"^MAX_ROUNDS\s*=", s, re.M)) for s in sources) == 1


def test_converse_follows_the_multi_round_protocol():
    from lmms_scene.models._base import MAX_ROUNDS, StopConversation, converse

    seen = []

    def next_turn(round_idx, previous, info):
        seen.append((round_idx, list(previous), info))
        return (None if round_idx == 3 else f"turn {round_idx}"), round_idx * 10

    turns, outputs = converse("turn 0", lambda ts: f"answer to {ts[-1]}", next_turn, lambda: pytest.fail("limit"))
    assert turns == ["turn 0", "turn 1", "turn 2"]
    assert outputs == ["answer to turn 0", "answer to turn 1", "answer to turn 2"]
    assert [s[0] for s in seen] == [1, 2, 3] and seen[0][2] is None and seen[2][2] == 20
    assert seen[1][1] == ["answer to turn 0", "answer to turn 1"]

    # one round without next_turn
    assert converse("only", lambda ts: "a")[1] == ["a"]

    # a task that never ends: the limit is called after MAX_ROUNDS answers
    hits = []
    _turns, outputs = converse("t", lambda ts: "a", lambda i, p, info: ("t", info), lambda: hits.append(1))
    assert len(outputs) == MAX_ROUNDS and hits == [1]

    # an answer that stops the conversation keeps the rounds before
    def answer(ts):
        if len(ts) == 3:
            raise StopConversation
        return "a"

    assert converse("t", answer, lambda i, p, info: ("t", info), lambda: None)[1] == ["a", "a"]


def test_scene_models_raise_past_max_rounds():
    from lmms_scene.models._base import MAX_ROUNDS, RequestInfo, Turn
    from lmms_scene.models.echo import Echo

    model = Echo()
    forever = lambda i, p, info: (Turn(text="more"), info)  # noqa: E731
    with pytest.raises(RuntimeError, match=f"task 't' doc 7: no terminal signal after {MAX_ROUNDS} rounds"):
        model._converse(RequestInfo("t", "test", 7, None), Turn(text="go"), forever)
