"""Judging that wording cannot fool (issue 16, item 4).

* The strict verdict parser against the labelled replies in tests/data/judge_verdicts.jsonl
  (written phrasings, the issue's reproductions, real SmolLM2-135M-Instruct replies, a
  held-out batch; docs/reliability.md gives the agreement figures).
* Every judge provider's reply goes through that one parser.
* Only completed conversations are judged: a "Yes" never makes a stopped one correct.
* ``layered-vqa judge`` asks about the run's own question texts and refuses data that
  is not the run's (a generated build shares question ids with the embedded sample).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmms_scene import judges
from lmms_scene.data.layered_vqa.builder import build_synthetic
from lmms_scene.data.layered_vqa.rounds import turns_of
from lmms_scene.data.layered_vqa.sample import toy_item
from lmms_scene.data.layered_vqa.schema import QUESTION_TYPES
from lmms_scene.data.layered_vqa.views import schedule_docs
from lmms_scene.judges import JudgeSpec, parse_verdict, read_verdict
from lmms_scene.metrics.layered_vqa import aggregation, judging, scoring

LABELLED = Path(__file__).parent / "data" / "judge_verdicts.jsonl"
_VALUE = {"yes": True, "no": False, None: None}


def _labelled() -> list[dict]:
    return [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_labelled_set_is_large_and_holds_the_issues_reproductions():
    rows = _labelled()
    replies = [r["reply"] for r in rows]
    assert len(rows) >= 100 and len(set(replies)) == len(replies)
    labels = {r["reply"]: r["verdict"] for r in rows}
    assert labels["Correct answer: red. The model answered blue."] is None  # never yes; no verdict to read
    assert labels["Right answer would be red."] == "no"
    assert labels["No doubt, it's correct."] == "yes"
    assert labels["The gold answer is not the same as the model answer."] == "no"  # SmolLM2's usual reply
    assert {r["source"] for r in rows} >= {"written", "issue", "smollm2", "heldout"}
    assert {r["verdict"] for r in rows} == {"yes", "no", None}


@pytest.mark.parametrize("row", _labelled(), ids=lambda r: r["reply"][:60])
def test_every_labelled_reply_reads_as_labelled(row):
    got = read_verdict(row["reply"])
    assert got.value is _VALUE[row["verdict"]], got


@pytest.mark.parametrize(
    "text",
    [
        "Correct answer: red. The model answered blue.",
        "Right answer would be red.",
        "Correct answer: blue.",
        "Yes and no",
        "yes/no",
        "Yesterday",
        "Yes, but it is incorrect",
        "Correct answers are hard to define here.",
    ],
)
def test_wording_that_looks_like_yes_is_never_yes(text):
    assert parse_verdict(text) is not True


def test_unparsed_is_none_never_a_guess():
    # a reply with no verdict, and one that says both, are None: counted as unparsed
    for text in ("The model answered blue.", "It is correct. It is wrong.", "I think it is correct.", 7, None):
        assert parse_verdict(text) is None
    reply = judges.ask(JudgeSpec("j", "m"), "q", client=_Client("The model answered blue."))
    assert reply.ok and reply.verdict is None and reply.status == judges.UNPARSED


class _Reply:
    def __init__(self, content):
        self.content, self.success, self.error_message = content, True, None


class _Client:
    def __init__(self, content):
        self.content, self.n = content, 0

    def evaluate(self, request):
        self.n += 1
        return _Reply(self.content)


def test_every_provider_reply_goes_through_the_one_parser(monkeypatch):
    """lmms-eval's clients (its real offline ``dummy`` provider), the ``hf`` local judge's
    client interface and CESG's judges: every verdict is :func:`parse_verdict`'s."""
    from lmms_scene.metrics.cesg.judges import ExtraJudge, SynonymVerifier

    seen: list[str] = []

    def spy(text, prompt=None):
        seen.append(text)
        return read_verdict(text, prompt).value

    monkeypatch.setattr(judges, "parse_verdict", spy)
    dummy = judges.ask(JudgeSpec("d", "x", provider="dummy"), "Is it?")  # lmms-eval's own client
    assert dummy.ok and seen == [dummy.content]
    smol_reply = "The gold answer is not the same as the model answer."
    hf_like = judges.ask(JudgeSpec("h", "/models/smol.gguf", provider="hf"), "Is it?", client=_Client(smol_reply))
    assert hf_like.verdict is False and seen[-1] == smol_reply
    verifier = SynonymVerifier(JudgeSpec("v", "m"), client=_Client("A and B mean the same missing thing."))
    assert verifier("no helmet", "helmet missing") is True and seen[-1] == "A and B mean the same missing thing."
    extra = ExtraJudge(
        JudgeSpec("e", "m"), "a worker, no helmet", client=_Client("The claim is not true of the scene.")
    )
    assert extra("helmet") is False and seen[-1] == "The claim is not true of the scene."


def test_no_other_module_parses_verdicts():
    """The package has one verdict parser: no module but judges.py reads yes/no itself
    or calls lmms-eval's loose parsers."""
    root = Path(judges.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name == "judges.py" and path.parent == root:
            continue
        if "parse_binary_response" in text or "ResponseParser" in text or 'startswith("yes")' in text:
            offenders.append(str(path.relative_to(root)))
    assert offenders == []


# -- only completed conversations are judged ------------------------------------------------


def _doc(q=0, s=0, schedule="sharded-q"):
    return dict(
        toy_item(4),
        scene_id=f"s{s}",
        question_id=f"s{s}-q{q}",
        question_type=QUESTION_TYPES[q],
        schedule=schedule,
        seed=0,
    )


def test_a_stopped_conversation_is_never_judged_and_a_yes_cannot_make_it_correct():
    docs = [_doc(q=q) for q in range(3)]
    turns = turns_of(docs[0])
    assert len(turns) > 1
    stopped = scoring.score_row(docs[0], ["A red square."], turns)  # one reply of several turns
    finished = scoring.score_row(docs[1], ["Got it."] * (len(turns) - 1) + ["A green circle."], turns_of(docs[1]))
    empty = scoring.score_row(docs[2], ["Got it."] * (len(turns) - 1) + [""], turns_of(docs[2]))
    assert stopped["failure"] and stopped["correct"] is None and finished["correct"] is False
    yes = _Client("Yes.")
    judged = judging.judge_rows(
        [stopped, finished, empty], [JudgeSpec("a", "org/A")], model="m", model_args="", clients={"a": yes}
    )
    assert yes.n == 1  # only the finished, non-empty conversation reached the judge
    by_output = {r["output"]: r for r in judged}
    s, f, e = by_output["A red square."], by_output["A green circle."], by_output[""]
    assert s["correct"] is None and s["judge"] == {
        "judged": False,
        "reason": judging.NOT_JUDGED_STOPPED,
        "failure": stopped["failure"],
    }
    assert e["correct"] is False and e["judge"]["reason"] == judging.NOT_JUDGED_EMPTY
    assert f["correct"] is True and f["judge"]["judged"] and f["rule_correct"] is False
    summary = judging.judge_summary(judged)
    assert summary == {
        **summary,
        "rows": 3,
        "judged": 1,
        "not_judged": 2,
        "not_judged_stopped": 1,
        "not_judged_empty": 1,
    }
    rep = aggregation.report(judged, n_boot=20)
    # the stopped conversation is left out of accuracy (counted), never a judged success
    assert rep["n_failed_conversations"] == 1 and rep["overall"]["accuracy"] == pytest.approx(0.5)
    assert rep["overall"]["not_computed"]["accuracy"] == 1


def test_every_repeat_is_judged_as_a_row_of_its_own():
    doc = _doc(schedule="full")
    turns = turns_of(doc)
    first = scoring.score_row(doc, ["A red square."], turns, repeat=0)
    second = scoring.score_row(doc, ["A green circle."], turns, repeat=1)
    row = dict(first, repeat_rows=[second])  # how process_results logs a --repeats 2 run
    client = _Client("Yes.")
    judged = judging.judge_rows([row], [JudgeSpec("a", "org/A")], model="m", model_args="", clients={"a": client})
    assert client.n == 2 and [r["repeat"] for r in judged] == [0, 1]
    assert all(r["grader"] == "llm_judge_majority" and "repeat_rows" not in r for r in judged)


def test_rows_without_question_texts_are_refused_before_any_judge_is_asked():
    row = scoring.score_row(_doc(schedule="full"), ["A red square."], turns_of(_doc(schedule="full")))
    assert row["question"] == _doc()["question"]  # the run logs what it asked
    old = {k: v for k, v in row.items() if k != "question"}
    client = _Client("Yes.")
    with pytest.raises(ValueError, match="no question text"):
        judging.judge_rows([old], [JudgeSpec("a", "m")], model="judged-model", model_args="", clients={"a": client})
    with pytest.raises(ValueError, match="differ from the run's own"):
        judging.judge_rows(
            [row],
            [JudgeSpec("a", "m")],
            model="judged-model",
            model_args="",
            clients={"a": client},
            questions={row["question_id"]: "What colour is the sky?"},
        )
    assert client.n == 0
    judged = judging.judge_rows(
        [old],
        [JudgeSpec("a", "m")],
        model="judged-model",
        model_args="",
        clients={"a": client},
        questions={row["question_id"]: row["question"]},
    )
    assert client.n == 1 and judged[0]["correct"] is True


# -- the judge command uses the run's own data -------------------------------------------------


def _built_run(tmp_path: Path, with_question: bool) -> tuple[Path, Path, list[dict]]:
    """A saved Layered-VQA run over a freshly generated build whose question ids are the
    embedded sample's (synth-0000-q0, ...) with other texts."""
    import datasets

    report = build_synthetic(tmp_path / "built", scenes=3, seed=7, size=(64, 48))
    data = datasets.load_dataset("parquet", data_files={"test": str(report.out)})["test"]
    docs = schedule_docs(data, ["full"])
    rows = []
    for i in range(len(docs)):
        row = scoring.score_row(docs[i], [docs[i]["answer"]], turns_of(docs[i]))
        if not with_question:
            row.pop("question")
        rows.append(row)
    run = tmp_path / "out" / "model"
    run.mkdir(parents=True)
    results = {
        "results": {"layered_vqa_built": {"accuracy,none": 1.0}},
        "configs": {"layered_vqa_built": {"metadata": {"benchmark": "layered_vqa"}}},
        "config": {"model": "qwen2_5_vl", "model_args": "pretrained=org/judged"},
    }
    (run / "20260101_results.json").write_text(json.dumps(results))
    (run / "20260101_samples_layered_vqa_built.jsonl").write_text(
        "".join(json.dumps({"doc_id": i, "layered_vqa_report": r}) + "\n" for i, r in enumerate(rows))
    )
    return tmp_path / "out", tmp_path / "built", rows


def test_judge_refuses_the_embedded_sample_for_a_generated_build(tmp_path, capsys):
    import pyarrow.parquet as pq

    from lmms_scene.cli import main
    from lmms_scene.registration import tasks_path

    sample = tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet"
    out, built, rows = _built_run(tmp_path, with_question=False)
    sample_texts = {
        r["question_id"]: r["question"] for r in pq.read_table(sample, columns=["question_id", "question"]).to_pylist()
    }
    built_texts = {
        r["question_id"]: r["question"]
        for r in pq.read_table(next(built.rglob("*.parquet")), columns=["question_id", "question"]).to_pylist()
    }
    shared = set(sample_texts) & set(built_texts)
    assert len(shared) >= 10 and sum(sample_texts[q] != built_texts[q] for q in shared) >= 10  # the trap
    # no texts in the samples and no --data: refused, saying what to give
    assert main(["layered-vqa", "judge", str(out), "--judges", "dummy:d=x"]) == 2
    assert "carry no question text" in capsys.readouterr().err
    # the embedded sample as --data: refused, naming a disagreeing question
    assert main(["layered-vqa", "judge", str(out), "--judges", "dummy:d=x", "--data", str(sample)]) == 2
    err = capsys.readouterr().err
    assert "is not the data of" in err and "synth-0000-q" in err
    # the build itself: judged, against its own texts
    saved = tmp_path / "judged.json"
    assert (
        main(["layered-vqa", "judge", str(out), "--judges", "dummy:d=x", "--data", str(built), "--out", str(saved)])
        == 0
    )
    judged = json.loads(saved.read_text())["rows"]["judged"]
    assert len(judged) == len(rows) and all(r["judge"]["judged"] for r in judged)


def test_judge_takes_the_texts_from_the_samples_and_checks_given_data(tmp_path, capsys, monkeypatch):
    from lmms_scene.cli import main
    from lmms_scene.registration import tasks_path

    out, built, rows = _built_run(tmp_path, with_question=True)
    asked: list[str] = []
    real_ask = judges.ask

    def ask(spec, prompt, *, client=None):
        asked.append(prompt)
        return real_ask(spec, prompt, client=client)

    monkeypatch.setattr(judges, "ask", ask)
    assert main(["layered-vqa", "judge", str(out), "--judges", "dummy:d=x"]) == 0
    assert len(asked) == len(rows)
    for prompt, row in zip(asked, rows):
        assert f"Question: {row['question']}\n" in prompt and f"Gold answer: {row['answer']}\n" in prompt
    sample = tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet"
    assert main(["layered-vqa", "judge", str(out), "--judges", "dummy:d=x", "--data", str(sample)]) == 2
    assert "the run asked" in capsys.readouterr().err
    assert len(asked) == len(rows)  # the refusal came before any judge was asked
