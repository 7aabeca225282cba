"""The leaderboard against a forger who has read the code (issue 31): each probe is a
submission built from a real run (tests/results_kit.py), then forged. "Resealed": rows
edited, then every hash, headline, interval, n and fingerprint recomputed, so only the
checks against the data and against the outputs can refuse it.

Also: one hostile file costs one row (a /dev/zero link, a FIFO, huge numbers, deep
nesting, a lone surrogate), the board shows what it checked (names normalised and escaped,
the submitter's words labelled as theirs), Layered-VQA ranks by absolute accuracy (a
constant answer sits below the blind baseline), and a refused run prints the ``--official``
file that would vouch for its data.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from results_kit import by_schedule, official_fingerprints, write_run

from lmms_scene import benchmarks
from lmms_scene.report import leaderboard
from lmms_scene.report import submission as S

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("submission")]


def reseal(sub, bench: str, edit):
    """``edit(rows_by_task)`` changes the rows in place; then the rows' hashes, every
    headline value, interval and n, and the data fingerprint are recomputed."""
    forged = copy.deepcopy(sub)
    entry = forged["benchmarks"][bench]
    mod = benchmarks.get(bench).results()
    rows = {t: S.payload_rows(p) for t, p in entry["rows"].items()}
    edit(rows)
    entry["rows"], entry["rows_sha256"] = {}, {}
    for t, task_rows in rows.items():
        entry["rows"][t] = S.rows_payload(task_rows, mod.VERIFY_FIELDS)
        entry["rows_sha256"][t] = S.rows_sha256(entry["rows"][t])
    head = [r for rs in rows.values() for r in rs] if benchmarks.get(bench).pooled else rows[entry["task"]]
    again = mod.recompute(head)
    for name, m in entry["metrics"].items():
        ci = (again["cell"].get("ci95") or {}).get(name)
        if again["cell"].get(name) is not None:
            m.update(value=again["cell"][name], ci95=list(ci) if ci else None)
        m["n"] = again["dataset"]["n_rows"]
    entry["dataset"].update(fingerprint=again["dataset"]["fingerprint"], n_rows=again["dataset"]["n_rows"])
    return forged


def problems_of(sub, official) -> list[str]:
    problems = S.verify(sub, official=official)
    assert problems, "the forgery was accepted"
    return problems


def only(bench: str, official) -> dict[str, list[str]]:
    return {k: v for k, v in official.items() if k != bench}


# -- 1. rows checked against the data ------------------------------------------------------


def test_a_self_claimed_hub_source_vouches_for_nothing(good_submission):
    _, official, sub = good_submission
    assert sub["benchmarks"]["cooco"]["dataset"]["source"]["path"] == "fmerlo/COOCO"
    assert S.verify(sub, official=official) == []  # vouched for by the operator: ranked
    problems = problems_of(sub, only("cooco", official))  # the file's own claim: not enough
    fp = sub["benchmarks"]["cooco"]["dataset"]["fingerprint"]
    assert any(
        "$.benchmarks.cooco.dataset: not the benchmark" in p
        and fp in p
        and "'fmerlo/COOCO', which is not checked" in p
        and json.dumps({"cooco": [fp]}) in p
        for p in problems
    ), problems


def test_a_resealed_refclipscore_of_2_everywhere_is_refused(good_submission):
    _, official, sub = good_submission

    def edit(rows):
        for r in rows["cooco"]:
            r["refclipscore"] = 2.0

    assert any(
        "refclipscore 2.0 is not the harmonic mean of its parts" in p
        for p in problems_of(reseal(sub, "cooco", edit), official)
    )


def test_a_one_row_submission_and_one_missing_its_unscored_rows_are_not_the_data(good_submission):
    _, official, sub = good_submission
    one = reseal(sub, "cooco", lambda rows: rows.__setitem__("cooco", rows["cooco"][:1]))
    assert any("cooco.dataset: not the benchmark" in p and "1 items" in p for p in problems_of(one, official))
    fewer = reseal(sub, "cooco", lambda rows: rows.__setitem__("cooco", rows["cooco"][3:]))
    assert any("cooco.dataset: not the benchmark" in p for p in problems_of(fewer, official))


def test_duplicated_rows_are_refused_by_id(good_submission):
    _, official, sub = good_submission

    def perfect_copies_first(rows):
        for t, rs in rows.items():
            rows[t] = [
                {**r, "output": r["answer"], "correct": True, "cannot_tell": False, "empty": False} for r in rs
            ] + rs

    problems = problems_of(reseal(sub, "layered_vqa", perfect_copies_first), official)
    assert any("appears more than once (duplicates are refused)" in p and "question_id=" in p for p in problems), (
        problems
    )

    def one_perfect_copy(rows):
        rows["snus"].insert(0, {**rows["snus"][0], "CESG": 1.0})

    problems = problems_of(reseal(sub, "snus", one_perfect_copy), official)
    assert any("snus.rows.snus: row image_id=" in p and "appears more than once" in p for p in problems), problems


def test_missing_schedules_are_counted_as_failures_and_strays_refused(good_submission):
    _, official, sub = good_submission
    task = next(t for t in sub["benchmarks"]["layered_vqa"]["rows"] if t.endswith("oracle"))
    problems = problems_of(reseal(sub, "layered_vqa", lambda rows: rows.pop(task)), official)
    assert any(
        "21 of the 336 rows its data has are missing (counted as failures): unrankable" in p for p in problems
    ), problems

    def stray(rows):
        rows["cooco"].append({**rows["cooco"][0], "noise_area": "context", "noise_level": 0.5})

    assert any("is not a view the task scores" in p for p in problems_of(reseal(sub, "cooco", stray), official))


def test_every_row_of_an_item_carries_the_item_gold(good_submission):
    _, official, sub = good_submission

    def gold_follows_the_output(rows):
        for t, rs in rows.items():
            if t != "layered_vqa_full":  # the first row of each item keeps the real gold
                for r in rs:
                    r["answer"] = r["output"]

    problems = problems_of(reseal(sub, "layered_vqa", gold_follows_the_output), official)
    assert any(": answer " in p and "is not its item's" in p for p in problems), problems


# -- 2. scores recomputed from the outputs; closed, typed sets ----------------------------------


def test_resealed_scores_the_outputs_do_not_give_are_refused(good_submission):
    _, official, sub = good_submission

    def cesg_up(rows):
        for r in rows["snus"]:
            if r["status"] == "scored":
                r.update(CESG=1.0, F1_o=1.0)

    problems = problems_of(reseal(sub, "snus", cesg_up), official)
    assert any("rows state scores their outputs do not give" in p for p in problems)
    assert any(": CESG is 1.0 but its output gives" in p for p in problems), problems

    def all_correct(rows):
        for rs in rows.values():
            for r in rs:
                r["correct"] = True

    problems = problems_of(reseal(sub, "layered_vqa", all_correct), official)
    assert any(": correct is True but its output gives False" in p for p in problems), problems

    def levenshtein_right(rows):
        for r in rows["cooco"]:
            r["levenshtein_accuracy"] = 1.0

    problems = problems_of(reseal(sub, "cooco", levenshtein_right), official)
    assert any(": levenshtein_accuracy is 1.0 but its output gives 0.0" in p for p in problems), problems


def test_clip_text_scores_are_rederived_when_the_checkpoint_is_here(good_submission, tmp_path):
    _, official, sub = good_submission

    def accuracy_up(rows):
        for r in rows["cooco"]:
            r["accuracy"] = 1.0

    problems = problems_of(reseal(sub, "cooco", accuracy_up), official)
    assert any(": accuracy is 1.0 but its output gives 0.0" in p for p in problems), problems
    _, found = S.check(sub, official=official)
    assert any("re-derived with" in n for n in found["cooco"]["rederived"])
    # the named checkpoint not on this machine: the same forgery passes, and the board says
    # what it could not re-derive
    away = reseal(sub, "cooco", accuracy_up)
    for prov in away["benchmarks"]["cooco"]["provenance"].values():
        prov["clip_model"] = str(tmp_path / "not-here")
    problems, found = S.check(away, official=official)
    assert problems == [] and any("not re-derived: the checkpoint" in n for n in found["cooco"]["rederived"])


def test_a_hidden_failure_is_refused(good_submission):
    _, official, sub = good_submission
    snus = [
        (
            "an unknown status",
            {"status": "Unscored", **{k: None for k in ("CESG", "F1_o")}},
            "is not one of the allowed values",
        ),
        (
            "a failure relabelled",
            {
                "status": "reference_without_absent_information",
                "CESG": None,
                "F1_o": None,
                "P_o": None,
                "R_o": None,
                "F1_a": None,
                "P_a": None,
                "R_a": None,
                "F1_r": None,
                "P_r": None,
                "R_r": None,
            },
            "status is 'reference_without_absent_information' but its output gives 'scored'",
        ),
    ]
    for what, change, reason in snus:
        forged = reseal(
            sub,
            "snus",
            lambda rows, change=change: next(r for r in rows["snus"] if r["status"] == "scored").update(change),
        )
        assert any(reason in p for p in problems_of(forged, official)), what
    cooco = [
        ({"scored": None}, "scored: null where a value is required"),
        ({"refclipscore": True}, "refclipscore: True is not a num"),
        ({"accuracy": "0.9"}, "accuracy: '0.9' is not a 0-or-1 score"),
    ]
    for change, reason in cooco:
        forged = reseal(sub, "cooco", lambda rows, change=change: rows["cooco"][0].update(change))
        assert any(reason in p for p in problems_of(forged, official)), reason


# -- 3. a ranking a constant answer cannot top ----------------------------------------------------


def _layered_items(final):
    import datasets

    from lmms_scene.data.layered_vqa.rounds import turns_of
    from lmms_scene.tasks.layered_vqa import utils

    path = Path(__file__).resolve().parents[1] / "tasks/layered_vqa/sample/layered_vqa_sample.parquet"
    docs = utils.process_docs_sample(datasets.load_dataset("parquet", data_files={"test": str(path)})["test"])
    return [utils.process_results(doc, [["Got it." for _ in turns_of(doc)[:-1]] + [final(doc)]]) for doc in docs]


def test_a_constant_answer_ranks_below_the_blind_baseline(tmp_path):
    from lmms_scene.baselines.layered_vqa import blind_answer
    from lmms_scene.data.layered_vqa.delivery import SELECTION

    subs, official = tmp_path / "subs", {}
    subs.mkdir()
    finals = {
        "blind": lambda d: blind_answer(d, "Layers:" if d["schedule"] in SELECTION else ""),
        "red": lambda d: "Red.",
    }
    made = {}
    for name, final in finals.items():
        run = tmp_path / name
        sched = by_schedule(_layered_items(final))
        write_run(
            run,
            {t: ("layered_vqa", v) for t, v in sched.items()},
            groups={"layered_vqa": ("layered_vqa", list(sched))},
            model_args=f"pretrained=/m/{name}",
        )
        official.setdefault("layered_vqa", []).extend(official_fingerprints(run)["layered_vqa"])
        made[name] = S.build(run, official=official)
        S.write(made[name], subs / f"{name}.json")
    red, blind = (made[n]["benchmarks"]["layered_vqa"]["metrics"] for n in ("red", "blind"))
    # what ranked before: red keeps at least as much of its (poor) full accuracy as blind does
    assert red["retained_text"]["value"] >= blind["retained_text"]["value"]
    assert red["accuracy"]["value"] < blind["accuracy"]["value"]
    board = leaderboard.build(subs, official=official)
    entries = board.groups["layered_vqa"][0].entries
    assert [e.file for e in entries] == ["blind.json", "red.json"] and [e.rank for e in entries] == [1, 2]
    assert (
        entries[0].metric == "accuracy"
        and "accuracy_full" in entries[0].others
        and "retained_text" in entries[0].others
    )
    assert "Ranked by final-turn accuracy" in leaderboard.markdown(board)


# -- 4. one bad file costs one row ----------------------------------------------------------------


def test_hostile_files_cost_one_row_each_and_the_board_is_still_written(good_submission, tmp_path):
    _, official, sub = good_submission
    subs = tmp_path / "subs"
    subs.mkdir()
    S.write(sub, subs / "good.json")
    text = json.dumps(sub)
    marked = copy.deepcopy(sub)
    marked["benchmarks"]["snus"]["metrics"]["CESG"]["value"] = 0.123456789
    marked["benchmarks"]["snus"]["rows"]["snus"]["values"][0][2] = 0.987654321
    (subs / "digits.json").write_text(json.dumps(marked).replace("0.123456789", "9" * 401))
    (subs / "e400.json").write_text(json.dumps(marked).replace("0.987654321", "1e400"))
    (subs / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (subs / "surrogate.json").write_text(text.replace('"model_args": "', '"model_args": "\\ud800', 1))
    (subs / "twice.json").write_text(text.replace('{"format"', '{"format": "x", "format"', 1))
    (subs / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(subs / "fifo.json")
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"secret_key_name": 1}))
    (subs / "out.json").symlink_to(outside)
    (subs / "dir.json").mkdir()
    board = leaderboard.build(subs, official=official)
    assert board.n_valid == 1 and [e.file for e in board.groups["snus"][0].entries] == ["good.json"]
    why = {r.file: " ".join(r.reasons) for r in board.invalid}
    assert "401 digits" in why["digits.json"] and "1e400 is not a finite number" in why["e400.json"]
    assert "nested deeper than" in why["deep.json"] and "lone surrogate" in why["surrogate.json"]
    assert "appears twice" in why["twice.json"]
    for name in ("zero.json", "out.json"):
        assert "a symbolic link" in why[name]
    assert "a FIFO, not a regular file" in why["fifo.json"] and "a folder" in why["dir.json"]
    md = leaderboard.write(board, tmp_path / "lb.md").read_text()
    page = leaderboard.write(board, tmp_path / "lb.html").read_text()
    for name in why:
        assert name in md and name in page
    assert "secret_key_name" not in md + page


# -- 5. what the board shows is what it checked ------------------------------------------------------


def test_names_are_normalised_escaped_and_the_submitter_words_labelled(good_submission, tmp_path):
    _, official, sub = good_submission
    subs = tmp_path / "subs"
    subs.mkdir()
    S.write(sub, subs / "a.json")
    look_alike = copy.deepcopy(sub)
    look_alike["model"]["name"] = sub["model"]["name"][:3] + "\u200b" + sub["model"]["name"][3:]
    look_alike["benchmarks"]["snus"]["dataset"]["official_note"] = "VERIFIED official release"
    for prov in look_alike["benchmarks"]["snus"]["provenance"].values():
        prov["cesg"] = {"parser": "VERIFIED-BY-LMMS-SCENE"}
    S.write(look_alike, subs / "b.json")
    hostile = copy.deepcopy(sub)
    hostile["model"]["name"] = "[x](javascript:alert(1))\u0000\u001b[31m"
    S.write(hostile, subs / "[y](javascript:alert(2)).json")
    board = leaderboard.build(subs, official=official)
    assert board.n_valid == 3
    assert any(f"{sub['model']['name']} (" in n and "submitted 2 times" in n for n in board.notes["snus"]), board.notes
    md = leaderboard.markdown(board)
    page = leaderboard.html(board)
    for text in (md, page):
        assert (
            "VERIFIED official release" not in text
            and "\x00" not in text
            and "\x1b" not in text
            and "\u200b" not in text
        )
    assert "](javascript:" not in md  # Markdown: no live link; HTML: no element at all
    assert "\\[x\\]\\(javascript\\:alert\\(1\\)\\)" in md
    assert "the submitter's, not checked" in md and "VERIFIED-BY-LMMS-SCENE" in md
    assert "Re-derived by this board" in md and "CESG re-derived from the outputs" in md
    assert "vouched for by this board" in md
    import re

    assert not re.search(r"<a\b|href=|javascript:[^<]*</a>", page)


# -- 6. an honest local board ---------------------------------------------------------------------


def test_a_refused_run_prints_the_official_file_that_vouches_for_it(good_submission, tmp_path, capsys):
    from lmms_scene.cli import main

    _, official, sub = good_submission
    subs = tmp_path / "subs"
    subs.mkdir()
    S.write(sub, subs / "mine.json")
    assert main(["leaderboard", str(subs), "--out", str(tmp_path / "lb.md")]) == 2
    err = capsys.readouterr().err
    hint = next(line for line in err.splitlines() if "to vouch for its snus data" in line)
    vouch = json.loads(hint.split("FILE holding ", 1)[1])
    assert vouch == {"snus": official["snus"]}
    merged: dict[str, list[str]] = {}
    for line in err.splitlines():
        if "FILE holding " in line:
            for bench, fps in json.loads(line.split("FILE holding ", 1)[1]).items():
                merged.setdefault(bench, []).extend(fps)
    (tmp_path / "official.json").write_text(json.dumps(merged))
    assert (
        main(
            ["leaderboard", str(subs), "--out", str(tmp_path / "lb.md"), "--official", str(tmp_path / "official.json")]
        )
        == 0
    )
    assert "1 verified submissions, 0 refused" in (tmp_path / "lb.md").read_text()
