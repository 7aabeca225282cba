"""The judge layer: strict verdicts, recorded failures, majority vote, no self-judging."""

from __future__ import annotations

import pytest

from lmms_scene import judges
from lmms_scene.judges import JudgeSpec, ask, consensus, is_self_judge, panel, parse_judges, parse_verdict


@pytest.mark.parametrize(
    "text",
    [
        "Yes",
        "yes.",
        "YES!",
        "**Yes**",
        "Correct",
        "Correct.",
        "The answer is correct.",
        "Verdict: yes",
        "Yes, the answer is correct.",
        "It is correct",
        "Final answer: Yes",
        "right",
        "The model's answer is right.",
    ],
)
def test_clear_yes(text):
    assert parse_verdict(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "No",
        "no.",
        "Not correct.",
        "not correct",
        "Incorrect",
        "INCORRECT.",
        "The answer is incorrect.",
        "Wrong",
        "No, the answer is wrong.",
        "The prediction is not correct.",
        "Verdict: no",
        "No. The correct answer is red.",
        "False",
    ],
)
def test_clear_no(text):
    assert parse_verdict(text) is False


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "1",
        "0",
        "Score: 0/10",
        "Score: 10/10",
        "Yes and no",
        "Yes, but it is incorrect",
        "Partially correct",
        "Correctness: 1",
        "yes/no",
        "True/False",
        "I think so",
        "dummy",
        "Maybe",
        "No, it is correct? yes",
        "Yesterday",
        "Nope",
        "The answer is partially correct",
        None,
        1,
    ],
)
def test_ambiguous_is_none(text):
    assert parse_verdict(text) is None


class _Reply:
    def __init__(self, content, success=True, error_message=None):
        self.content = content
        self.success = success
        self.error_message = error_message


class _Client:
    def __init__(self, content=None, exc=None, success=True):
        self.content, self.exc, self.success, self.requests = content, exc, success, []

    def evaluate(self, request):
        self.requests.append(request)
        if self.exc is not None:
            raise self.exc
        return _Reply(self.content, self.success, None if self.success else "server said no")


def test_ask_parses_and_sends_prompt():
    client = _Client("Not correct.")
    reply = ask(JudgeSpec("j", "m"), "Is it?", client=client)
    assert reply.ok and reply.verdict is False and reply.status == "no"
    assert client.requests[0].messages == [{"role": "user", "content": "Is it?"}]


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (TimeoutError("read timed out"), "timeout"),
        (RuntimeError("connection refused"), "error"),
        (type("APITimeoutError", (Exception,), {})("slow"), "timeout"),
    ],
)
def test_ask_records_failures_instead_of_raising(exc, kind):
    reply = ask(JudgeSpec("j", "m"), "q", client=_Client(exc=exc))
    assert not reply.ok and reply.failure == kind and reply.verdict is None and reply.content is None
    assert reply.status == kind and type(exc).__name__ in reply.error


def test_ask_records_unsuccessful_response_and_missing_content():
    assert ask(JudgeSpec("j", "m"), "q", client=_Client("yes", success=False)).failure == "error"
    assert ask(JudgeSpec("j", "m"), "q", client=_Client(None)).failure == "error"


def test_ask_unparsed_reply_is_not_a_failure_but_has_no_verdict():
    reply = ask(JudgeSpec("j", "m"), "q", client=_Client("Score: 7/10"))
    assert reply.ok and reply.verdict is None and reply.status == "unparsed"


def test_dummy_provider_offline():
    # lmms-eval's dummy provider answers "dummy": no verdict, no failure, no network
    reply = ask(JudgeSpec("d", "dummy-model", provider="dummy"), "Is it correct?")
    assert reply.ok and reply.content == "dummy" and reply.verdict is None


def test_make_client_points_openai_provider_at_base_url():
    client = judges.make_client(JudgeSpec("local", "my-judge", base_url="http://127.0.0.1:9/v1", timeout=2))
    assert client.api_url == "http://127.0.0.1:9/v1/chat/completions"
    assert client.config.model_name == "my-judge" and client.config.timeout == 2


def test_unreachable_local_server_is_a_recorded_failure():
    spec = JudgeSpec("local", "my-judge", base_url="http://127.0.0.1:9/v1", timeout=2)
    reply = ask(spec, "q", client=judges.make_client(spec))
    assert reply.failure in ("error", "timeout") and reply.verdict is None


def test_consensus_majority_ties_and_counts():
    R = judges.JudgeReply
    votes = [
        R("a", "yes", True),
        R("b", "no", False),
        R("c", "yes", True),
        R("d", None, None, "timeout", "t"),
        R("e", "hm", None),
    ]
    c = consensus(votes)
    assert (c.correct, c.yes, c.no, c.failed, c.unparsed) == (True, 2, 1, 1, 1)
    assert consensus(votes[:2]).correct is None  # tie
    assert consensus(votes[3:]).correct is None  # nothing usable
    assert consensus([R("b", "no", False)]).correct is False


def test_self_judge_detection():
    q = JudgeSpec("qwen7b", "Qwen/Qwen2.5-VL-7B-Instruct")
    assert is_self_judge(q, "qwen2_5_vl", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct,device=cpu")
    assert is_self_judge(q, "vllm", {"model": "/models/Qwen2.5-VL-7B-Instruct/"})
    assert is_self_judge(q, "qwen7b")
    assert not is_self_judge(q, "qwen2_5_vl", "pretrained=Qwen/Qwen2.5-VL-3B-Instruct")
    assert not is_self_judge(q, "llava_onevision", None)


def test_panel_asks_every_judge_and_self_judgments_do_not_vote():
    specs = [JudgeSpec("a", "org/A"), JudgeSpec("b", "org/B"), JudgeSpec("c", "org/C")]
    clients = {"a": _Client("yes"), "b": _Client("no"), "c": _Client(exc=TimeoutError("slow"))}
    result = panel(specs, "q", model="vllm", model_args="model=org/B", clients=clients)
    # b is the evaluated model: asked (its judgment is kept for Figure 4), not voting
    assert result.excluded == ("b",) and len(clients["b"].requests) == 1
    assert (result.correct, result.yes, result.no, result.failed) == (True, 1, 0, 1)
    replies = result.to_dict()["replies"]
    assert [(r["judge"], r["status"], r["self"]) for r in replies] == [
        ("a", "yes", False),
        ("b", "no", True),
        ("c", "timeout", False),
    ]
    # with the self-judge alone left, there is no consensus (never its own vote)
    alone = panel(specs[1:2], "q", model="vllm", model_args="model=org/B", clients=clients)
    assert alone.correct is None and alone.voters == 0 and len(alone.replies) == 1


def test_hf_judge_paths_and_spec():
    (spec,) = parse_judges("hf:/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (spec.provider, spec.model, spec.name) == (
        "hf",
        "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct.Q4_1",
    )
    (named,) = parse_judges("hf:smol=/m/a@b")  # a path keeps its "@"
    assert (named.name, named.model, named.base_url) == ("smol", "/m/a@b", None)
    with pytest.raises(FileNotFoundError, match="neither a model folder nor a .gguf file"):
        judges.resolve_hf_path("/no/such/model")


def test_hf_judge_folder_resolution(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b"")
    assert judges.resolve_hf_path(tmp_path) == (tmp_path, "a.gguf")
    (tmp_path / "b.gguf").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="2 .gguf files"):
        judges.resolve_hf_path(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert judges.resolve_hf_path(tmp_path) == (tmp_path, None)


def test_parse_judges():
    js = parse_judges("qwen=Qwen/Qwen2.5-VL-7B@http://localhost:8000/v1; dummy:d=x ;internvl")
    assert [(j.name, j.model, j.provider, j.base_url) for j in js] == [
        ("qwen", "Qwen/Qwen2.5-VL-7B", "openai", "http://localhost:8000/v1"),
        ("d", "x", "dummy", None),
        ("internvl", "internvl", "openai", None),
    ]
    with pytest.raises(ValueError, match="repeated"):
        parse_judges("a=x;a=y")
    with pytest.raises(ValueError, match="no model"):
        parse_judges("a=")


def test_spec_validation_names_the_field():
    with pytest.raises(ValueError, match="provider"):
        JudgeSpec("a", "m", provider="nope")
    with pytest.raises(ValueError, match="timeout"):
        JudgeSpec("a", "m", timeout=0)
