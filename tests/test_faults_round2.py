"""Faults and hostile input, round 2 (issue 32), without a model:

* the journal is evidence: a line edited, added, moved, a changed plan, a line after the
  end line are refused by ``rescore`` and ``--resume`` naming the line and the reason; a
  malformed line (missing field, wrong type, deep nesting) is a one-line error;
* a run is finished only when its files are: what the harness failed to write is named;
* JSON we read refuses repeated keys and absurd numbers, naming file, line and key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lmms_scene import evaluate, files
from lmms_scene import journal as J
from lmms_scene.cli import main


def _records(docs: int = 3, repeats: int = 1) -> list[dict]:
    out = [
        {
            "kind": "header",
            "journal_version": J.VERSION,
            "argv": ["lmms-scene", "eval"],
            "model": "m",
            "tasks": "t",
            "limit": None,
            "offset": 0,
            "repeats": repeats,
            "rank": 0,
            "world_size": 1,
        },
        {
            "kind": "plan",
            "tasks": {
                "t": {
                    "request_types": ["generate_until"],
                    "doc_ids": list(range(docs)),
                    "requests_per_doc": 1,
                    "repeats": repeats,
                }
            },
        },
    ]
    out += [
        {
            "kind": "output",
            "task": "t",
            "doc_id": d,
            "idx": 0,
            "copy": 0,
            "request_type": "generate_until",
            "arguments": [f"prompt {d}", {"max_new_tokens": 4}],
            "output": f"answer {d}",
        }
        for d in range(docs)
    ]
    out.append({"kind": "end", "status": "finished", "requests_done": docs, "requests_total": docs})
    return out


def _journal(folder: Path, records: list[dict] | None = None) -> Path:
    """A journal as lmms-scene writes it (a consistent chain of sums over ``records``)."""
    path = folder / J.FOLDER / "20260101T000000_1_rank0.jsonl"
    J.Journal(path).write(records if records is not None else _records())
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_a_journal_as_written_reads_back_and_every_line_carries_its_sum(tmp_path):
    path = _journal(tmp_path)
    assert all(json.loads(line)["sum"] for line in _lines(path))
    run = J.read([path])
    assert (
        run.status() == "finished"
        and run.outputs[("t", 2, 0)] == {0: "answer 2"}
        and not run.problems
        and not run.unverified
    )


def _edit(path: Path, edit) -> None:
    lines = _lines(path)
    edit(lines)
    path.write_text("\n".join(lines) + "\n")


def _replace_output(lines: list[str], number: int, new: str) -> None:
    lines[number - 1] = lines[number - 1].replace(json.loads(lines[number - 1])["output"], new)


@pytest.mark.parametrize(
    "case, edit, message",
    [
        ("edited output", lambda ls: _replace_output(ls, 4, "a better answer"), "line 4: the checksum does not match"),
        (
            "edited plan",
            lambda ls: ls.__setitem__(1, ls[1].replace("[0, 1, 2]", "[0, 1]")),
            "line 2: the checksum does not match",
        ),
        (
            "two lines swapped",
            lambda ls: ls.__setitem__(slice(3, 5), [ls[4], ls[3]]),
            "line 4: the checksum does not match",
        ),
        ("a line removed", lambda ls: ls.pop(3), "line 4: the checksum does not match"),
        (
            "a line without a sum appended after the end",
            lambda ls: ls.append(json.dumps(_records()[3] | {"output": "forged"})),
            "line 7: no checksum",
        ),
        ("a line appended after the end with its chain recomputed", None, "line 7: an output line after the end line"),
    ],
)
def test_an_edited_journal_is_refused_naming_the_line_and_the_reason(tmp_path, case, edit, message):
    path = _journal(tmp_path)
    if edit is None:  # a forger who recomputes the chain still cannot put an output after the end
        path.unlink()
        _journal(tmp_path, [*_records(), _records()[3] | {"output": "forged"}])
    else:
        _edit(path, edit)
    with pytest.raises(J.JournalRefused, match=message) as caught:
        J.read([path])
    assert str(path) in str(caught.value) and "refused" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "case, change, message",
    [
        (
            "arguments null",
            lambda r: r[2].update(arguments=None),
            "line 3: an output line whose field 'arguments' is null \\(expected the request's arguments, a list\\)",
        ),
        ("no task", lambda r: r[2].pop("task"), "line 3: an output line without its field 'task'"),
        (
            "doc_id a string",
            lambda r: r[2].update(doc_id="0"),
            "line 3: an output line whose field 'doc_id' is \"0\" \\(expected an integer >= 0\\)",
        ),
        ("doc_id negative", lambda r: r[2].update(doc_id=-1), "line 3: an output line whose field 'doc_id' is -1"),
        (
            "plan doc ids a string",
            lambda r: r[1]["tasks"]["t"].update(doc_ids="0-2"),
            "line 2: a plan line whose field 'tasks'",
        ),
        ("100k-deep output", lambda r: r[2].update(output="DEEP"), "line 3: nested deeper than 64 levels"),
        ("an unknown kind", lambda r: r.insert(2, {"kind": "note"}), "line 3: unknown record kind 'note'"),
        (
            "an output twice",
            lambda r: r.insert(3, dict(r[2])),
            "line 4: task 't' doc 0 request 0 repeat 1 again \\(first on line 3\\)",
        ),
        (
            "an output the plan does not hold",
            lambda r: r[2].update(doc_id=7),
            "an output for task 't' doc 7 request 0 that the plan does not hold",
        ),
        (
            "an end line that miscounts",
            lambda r: r[-1].update(requests_done=5),
            "the end line counts 5 outputs, the file holds 3",
        ),
        ("a second plan", lambda r: r.insert(2, r[1]), "line 3: a second plan"),
    ],
)
def test_a_malformed_journal_line_is_a_one_line_error(tmp_path, case, change, message):
    records = _records()
    change(records)
    path = _journal(tmp_path, records)
    if case == "100k-deep output":  # written by hand: json.dumps cannot write it either
        _edit(path, lambda ls: ls.__setitem__(2, ls[2].replace('"DEEP"', "[" * 100_000 + "]" * 100_000)))
    with pytest.raises(J.JournalRefused, match=message) as caught:
        J.read([path])
    assert "\n" not in str(caught.value)


def test_a_journal_from_before_the_sums_is_read_with_a_notice(tmp_path):
    path = tmp_path / J.FOLDER / "old.jsonl"
    path.parent.mkdir()
    records = _records()
    records[0]["journal_version"] = 1
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = J.read([path])
    assert run.unverified == [path] and "cannot be checked" in J.unverified_notes(run)[0]
    assert run.outputs[("t", 0, 0)] == {0: "answer 0"}
    # a sum in a journal whose header declares none is not taken either
    path.write_text("".join(json.dumps(r | {"sum": "0" * 64}) + "\n" for r in records))
    with pytest.raises(J.JournalRefused, match="line 1: a checksum in a journal whose header declares none"):
        J.read([path])


def test_rescore_and_resume_refuse_an_edited_journal_in_one_line(tmp_path, capsys):
    path = _journal(tmp_path)
    _edit(path, lambda ls: _replace_output(ls, 3, "edited"))
    assert main(["rescore", str(path), "--output_path", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3: the checksum does not match" in err and "Traceback" not in err
    assert (
        main(["eval", "--model", "echo", "--tasks", "t", "--output_path", str(tmp_path / "r"), "--resume", str(path)])
        == 2
    )
    err = capsys.readouterr().err
    assert (
        err.strip().splitlines()[-1].startswith("lmms-scene eval: error:")
        and "line 3: the checksum does not match" in err
    )
    assert "Traceback" not in err and not (tmp_path / "r").exists()


# -- a run is finished only when its files are ---------------------------------------------------


def _run_files(out: Path, rows: int, results: str | None = None) -> None:
    folder = out / "m"
    folder.mkdir(parents=True)
    text = (
        json.dumps({"results": {"t": {}}, "n-samples": {"t": {"original": 3, "effective": 3}}})
        if results is None
        else results
    )
    (folder / "2026-01-01T00-00-00_results.json").write_text(text)
    (folder / "2026-01-01T00-00-00_samples_t.jsonl").write_text(
        "".join(json.dumps({"doc_id": d}) + "\n" for d in range(rows))
    )


def test_missing_files_names_a_cut_results_json_and_short_samples_files(tmp_path):
    _run_files(tmp_path / "ok", 3)
    assert evaluate.missing_files(tmp_path / "ok", 0, {"t": 3}, log_samples=True) == []
    assert evaluate.missing_files(tmp_path / "ok", 0, None, log_samples=True) == []  # the results JSON's n-samples
    _run_files(tmp_path / "full", 0, results='{"results": {"t": {"cooco_acc,none": 0.5, "n')
    problems = evaluate.missing_files(tmp_path / "full", 0, {"t": 3}, log_samples=True)
    assert (
        len(problems) == 2
        and "_results.json is cut short or unreadable" in problems[0]
        and "holds 0 of 3 rows" in problems[1]
    )
    _run_files(tmp_path / "cut", 2)
    with (tmp_path / "cut" / "m" / "2026-01-01T00-00-00_samples_t.jsonl").open("a") as f:
        f.write('{"doc_id": 2, "resps"')
    assert (
        "line 3 is cut short (2 of 3 rows before it)"
        in evaluate.missing_files(tmp_path / "cut", 0, {"t": 3}, log_samples=True)[0]
    )
    assert evaluate.missing_files(tmp_path / "none", 0, {"t": 3}, log_samples=True) == [
        f"no results JSON was written under {tmp_path / 'none'}",
        "no samples file for t (3 documents)",
    ]


# -- JSON we read ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"a": 1,\n "b": {"c": 2},\n "a": 3}', "m.json line 3: key 'a' appears twice in one object"),
        ('[{"id": 1},\n {"id": 2,\n  "x": {"id": 3}, "id": 4}]', "m.json line 3: key 'id' appears twice in one object"),
        ('{"rel_score":\n ' + "7" * 400 + "}", "m.json line 2: the integer 777777777777... has 400 digits"),
        ('{"rel_score": 1e400}', "m.json line 1: the number 1e400 is out of range"),
        ('{"rel_score": 0.' + "1" * 100 + "}", "is 102 characters long"),
    ],
)
def test_json_refuses_repeated_keys_and_absurd_numbers_naming_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        files.loads(text, where="m.json")


def test_jsonl_lines_refuse_repeated_keys_and_non_finite_numbers_when_asked(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1}\n{"id": 2, "id": 3}\n')
    with pytest.raises(ValueError, match=r"rows.jsonl line 2: key 'id' appears twice"):
        files.read_jsonl(path)
    path.write_text('{"id": 1, "score": NaN}\n')
    assert files.read_jsonl(path)[0]["score"] != files.read_jsonl(path)[0]["score"]  # NaN where allowed
    with pytest.raises(ValueError, match="line 1: NaN is not a finite number"):
        files.read_jsonl(path, allow_nan=False)


def test_write_atomic_leaves_the_old_file_on_a_full_disk(tmp_path, monkeypatch):
    import errno
    import os

    target = tmp_path / "results.json"
    files.write_atomic(target, '{"old": 1}')

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="results.json: could not be written"):
        files.write_atomic(target, '{"new": 2}')
    assert target.read_text() == '{"old": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


# -- settings at the door ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"LMMS_SCENE_CESG": "weights=nan,0.25,0.25"},
            "LMMS_SCENE_CESG weights='nan,0.25,0.25': expected three finite numbers >= 0",
        ),
        (
            {"LMMS_SCENE_CESG": "weights=inf,0.25,0.25"},
            "LMMS_SCENE_CESG weights='inf,0.25,0.25': expected three finite numbers",
        ),
        ({"LMMS_SCENE_CESG": "weights=-0.5,1,0.5"}, "weights='-0.5,1,0.5': expected three finite numbers >= 0"),
        ({"LMMS_SCENE_CESG": "lambda=1.5"}, "LMMS_SCENE_CESG lambda='1.5': expected a number in [0, 1]"),
        ({"LMMS_SCENE_CESG": "lambda=nan"}, "LMMS_SCENE_CESG lambda='nan': expected a number in [0, 1]"),
        ({"LMMS_SCENE_CESG": "synonyms=maybe"}, "LMMS_SCENE_CESG synonyms='maybe': expected on or off"),
        ({"LMMS_SCENE_CESG": "lambda=0.5;lambda=0.7"}, "lambda is given twice"),
        (
            {"LMMS_SCENE_CESG": "weight=1,0,0"},
            "LMMS_SCENE_CESG='weight=1,0,0': expected key=value pairs separated by ';'",
        ),
        ({"LMMS_SCENE_CESG": "device=cuda:99"}, "LMMS_SCENE_CESG device='cuda:99': this machine's torch sees"),
        ({"LMMS_SCENE_DEVICE": "cuda:99"}, "LMMS_SCENE_DEVICE='cuda:99': this machine's torch sees"),
        ({"LMMS_SCENE_DEVICE": "gpu0"}, "LMMS_SCENE_DEVICE='gpu0': expected cpu, cuda, cuda:N or mps"),
        ({"LMMS_SCENE_COOCO_CLEAN": "yes"}, "LMMS_SCENE_COOCO_CLEAN='yes': expected skip or include"),
        ({"LMMS_SCENE_NO_PROGRESS": "please"}, "LMMS_SCENE_NO_PROGRESS='please': expected on or off"),
        ({"LMMS_SCENE_JOURNAL": "of"}, "LMMS_SCENE_JOURNAL='of': expected on or off"),
        (
            {"LMMS_SCENE_CLIP_MODEL": "openai/clip\nINFO forged"},
            "LMMS_SCENE_CLIP_MODEL='openai/clip\\nINFO forged': expected a non-empty name",
        ),
        (
            {"LMMS_SCENE_CESG": "extra=a=m1@http://h1:8000/v1,b=m2@http://h2:8000/v1"},
            "holds a ','; judges are separated by ';'",
        ),
        (
            {"LMMS_SCENE_CESG": "verifier=m@file:///etc/passwd"},
            "judge URL 'file:///etc/passwd': expected an http:// or https:// URL",
        ),
        (
            {"LMMS_SCENE_CESG": "verifier=m@javascript:alert(1)"},
            "judge URL 'javascript:alert(1)': expected an http:// or https:// URL",
        ),
        ({"LMMS_SCENE_CESG": "verifier=m@http://localhost:8000/v1\r\nX-Forged: 1"}, "without control characters"),
        (
            {"LMMS_SCENE_CESG": "verifier=m@http://localhost:8000@evil.example/v1"},
            "holds a user name or password before '@'",
        ),
    ],
)
def test_a_bad_setting_stops_eval_before_the_model_loads_in_one_line(monkeypatch, capsys, tmp_path, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["eval", "--model", "echo", "--tasks", "snus_sample", "--output_path", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lmms-scene eval: error: ") and message in err, err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_a_bad_model_args_device_stops_eval_before_the_model_loads(capsys, tmp_path):
    assert (
        main(
            [
                "eval",
                "--model",
                "echo",
                "--model_args",
                "device=cuda:99",
                "--tasks",
                "snus_sample",
                "--output_path",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "--model_args device='cuda:99': this machine's torch sees" in capsys.readouterr().err


def test_weights_that_do_not_sum_to_one_are_normalised_with_a_note(monkeypatch):
    from lmms_scene import settings

    monkeypatch.setenv("LMMS_SCENE_CESG", "weights=2,1,1")
    (note,) = settings.current().check()
    assert note == "LMMS_SCENE_CESG weights='2,1,1' sum to 4, not 1: normalised to 0.5,0.25,0.25"
    from lmms_scene.metrics.cesg.score import parse_components

    assert parse_components("weights=2,1,1;lambda=0.7") == {"weights": (0.5, 0.25, 0.25), "lambda_": 0.7}


@pytest.mark.parametrize("weights", ["nan,0.25,0.25", "inf,0.25,0.25", "0,0,0", "1,2"])
def test_cesg_command_refuses_weights_that_are_no_weights(tmp_path, capsys, weights):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"id": 1, "prediction": "There is no helmet.", "references": ["No helmet is worn."]}) + "\n"
    )
    assert main(["cesg", "--input", str(rows), f"--weights={weights}"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"lmms-scene cesg: error: --weights={weights!r}: expected three finite numbers >= 0 (w_o,w_a,w_r) with a positive sum\n"
    )


def test_the_scorer_itself_refuses_non_finite_weights():
    from lmms_scene.metrics.cesg.score import _resolve

    with pytest.raises(ValueError, match="weights: expected three non-negative"):
        _resolve({"weights": (float("nan"), 0.25, 0.25), "pipeline": object(), "encoder": None})


@pytest.mark.parametrize(
    "spec, message",
    [
        ("a=m1@http://h1:8000/v1,b=m2@http://h2:8000/v1", "holds a ','; judges are separated by ';'"),
        ("m@http://user:pw@host/v1", "holds a user name or password"),
        ("m@http:///v1", "expected a host name or address"),
        ("m@ftp://host/v1", "expected an http:// or https:// URL"),
        ("m@http://host:99999/v1", "not a URL"),
        ("m@http://ho st/v1", "holds whitespace or control characters"),
        ("m\x1b[31m@http://host/v1", "hold no control characters"),
    ],
)
def test_judge_lists_split_unambiguously_and_urls_are_http_with_a_host(spec, message):
    from lmms_scene.judges import parse_judges

    with pytest.raises(ValueError, match=re.escape(message)):
        parse_judges(spec)
    judges = parse_judges("a=m1@http://h1:8000/v1; b=m2@https://[::1]:8443/v1; dummy:d=x")
    assert [(j.name, j.base_url) for j in judges] == [
        ("a", "http://h1:8000/v1"),
        ("b", "https://[::1]:8443/v1"),
        ("d", None),
    ]


# -- input limits ------------------------------------------------------------------------------------


def test_one_cap_for_every_reader_of_a_model_text():
    from lmms_scene import judges
    from lmms_scene.metrics import outputs
    from lmms_scene.metrics.layered_vqa import grader

    assert judges.MAX_REPLY_CHARS == outputs.MAX_OUTPUT_CHARS == grader.MAX_OUTPUT_CHARS


@pytest.mark.slow
def test_layered_vqa_grade_reads_a_5mb_answer_cut_and_says_so(tmp_path, monkeypatch, capsys):
    """The grader's time grows faster than the length (100,000 characters: about 1 s; the
    issue's 5 MB answer had not finished after 250 s): it reads the first MAX_OUTPUT_CHARS.
    The cap is lowered here so the test grades little text; the rule is the same."""
    from lmms_scene.metrics.layered_vqa import grader

    monkeypatch.setattr(grader, "MAX_OUTPUT_CHARS", 2_000)
    answer = "Two circles. " + "The scene is calm and nothing else is there. " * 110_000  # about 5 MB
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"id": "q1", "gold": "Two.", "question_type": "counting", "answer": answer}) + "\n")
    assert len(path.read_bytes()) > 4_900_000
    assert main(["layered-vqa", "grade", "--input", str(path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["grades"]
    assert row["answer_cut"] == f"graded on its first 2000 of {len(answer)} characters"
    assert row["verdict"] == grader.grade(answer[:2000], "Two.", "counting").verdict == "correct"


def test_a_judge_reply_over_the_cap_is_read_cut_and_the_reply_says_so(monkeypatch):
    from lmms_scene import judges

    class Client:
        config = None

        def evaluate(self, _request):
            return type("R", (), {"success": True, "content": "No, it is wrong. " + "x" * 5_000_000})()

    monkeypatch.setattr(judges, "MAX_REPLY_CHARS", 1_000)
    reply = judges.ask(judges.JudgeSpec(name="j", model="m", provider="dummy"), "Is it right?", client=Client())
    assert reply.cut == "read on its first 1000 of 5000017 characters" and len(reply.content) == 1_000
    assert reply.verdict is False and reply.to_dict()["cut"] == reply.cut


def test_cooco_metadata_refuses_a_400_digit_rel_score_and_repeated_keys(tmp_path):
    from lmms_scene.data.cooco.schema import CoocoBuildError
    from lmms_scene.data.cooco.sources import read_metadata

    (tmp_path / "m.json").write_text('[{"file_name": "a.jpg",\n  "rel_score": ' + "7" * 400 + "}]")
    with pytest.raises(
        CoocoBuildError, match=r"m.json line 2: the integer 777777777777\.\.\. has 400 digits \(at most 20\)"
    ):
        read_metadata(tmp_path / "m.json")
    (tmp_path / "m.jsonl").write_text(
        '{"file_name": "a.jpg", "rel_score": 0.2}\n{"file_name": "b.jpg", "rel_score": 0.2, "rel_score": 0.9}\n'
    )
    with pytest.raises(CoocoBuildError, match="m.jsonl line 2: key 'rel_score' appears twice in one object"):
        read_metadata(tmp_path / "m.jsonl")
    (tmp_path / "k.json").write_text('{"a.jpg": {"scene": "office"},\n "a.jpg": {"scene": "street"}}')
    with pytest.raises(CoocoBuildError, match="k.json line 2: key 'a.jpg' appears twice"):
        read_metadata(tmp_path / "k.json")


def test_snus_and_layered_vqa_metadata_refuse_repeated_keys(tmp_path):
    from lmms_scene.data.snus.builder import read_metadata

    (tmp_path / "s.json").write_text(
        '[{"image_id": "1", "image": "a.jpg",\n  "caption": "No rail.",\n  "caption": "A rail."}]'
    )
    with pytest.raises(ValueError, match="s.json line 3: key 'caption' appears twice"):
        read_metadata(tmp_path / "s.json")
    (tmp_path / "s.jsonl").write_text('{"image_id": "1", "image_id": "2"}\n')
    with pytest.raises(ValueError, match="s.jsonl line 1: key 'image_id' appears twice"):
        read_metadata(tmp_path / "s.jsonl")
    from lmms_scene.metrics.layered_vqa.grader_io import read_answers

    (tmp_path / "a.jsonl").write_text(
        '{"id": 1, "gold": "Two.", "question_type": "counting", "answer": "2", "answer": "3"}\n'
    )
    with pytest.raises(ValueError, match="a.jsonl line 1: key 'answer' appears twice"):
        read_answers(tmp_path / "a.jsonl")


def test_submissions_and_official_lists_refuse_repeated_keys(tmp_path, capsys):
    from lmms_scene.report import submission

    (tmp_path / "s.json").write_text('{"format": "x", "model": "a", "model": "b"}')
    data, problems = submission.read(tmp_path / "s.json")
    assert data is None and problems == ["not JSON (key 'model' appears twice in one object)"]
    (tmp_path / "official.json").write_text('{"snus": ["f1"],\n "snus": ["forged"]}')
    results = tmp_path / "run"
    results.mkdir()
    assert (
        main(
            ["submit", str(results), "--out", str(tmp_path / "sub.json"), "--official", str(tmp_path / "official.json")]
        )
        == 2
    )
    assert "official.json line 2: key 'snus' appears twice in one object" in capsys.readouterr().err
