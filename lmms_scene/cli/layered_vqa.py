"""Layered-VQA on the command line.

- ``build layered-vqa --release DIR --out D [--name N]``: a local release (layer PNGs
  plus a question file) into ``D`` (``data/*.parquet``, card, the 16 schedule tasks
  ``layered_vqa_<schedule>_N`` and the group ``layered_vqa_N``), then the command that
  evaluates it; checks recomposition (max pixel difference per scene) and every layer
  index.
- ``build layered-synth --scenes N --seed S --out D [--name N]``: freshly generated scenes,
  the same way.
- ``layered-vqa grade --input answers.jsonl [--json]``: the rule grader on your own replies
  (one JSON object a line: id, gold, question_type, answer; optional question, label),
  printing each verdict (correct / wrong / cannot_tell) and its reason, and the agreement
  with the labels when lines carry one.
- ``layered-vqa judge RESULTS... --judges SPEC [--data D]``: re-grade a run's logged
  outputs with an LLM-judge panel (majority vote, no self-judging, failures counted;
  conversations that stopped early never judged), asking about the run's own question
  texts (logged in its samples; for older runs ``--data``, checked against the run), and
  print or write the judged report and the judge x model self-preference matrix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lmms_scene import compositing, judges, results
from lmms_scene.data.layered_vqa.builder import build_release, build_synthetic, evaluate_commands
from lmms_scene.files import write_atomic
from lmms_scene.metrics.layered_vqa import aggregation, grader_io, judging, scoring


def _size(value: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {value!r}") from None
    return w, h


_OUT_HELP = (
    "output folder (required): data/*.parquet, README.md (card), tasks/*.yaml; nothing is written into the package"
)
_NAME_HELP = "suffix of the written task names, layered_vqa_<schedule>_NAME and the group layered_vqa_NAME (default: the --out folder's name)"


def register_build(builds) -> None:
    b = builds.add_parser(
        "layered-vqa",
        help="Layered-VQA from a local release (layer PNGs + questions.jsonl), plus the tasks that evaluate it",
    )
    b.add_argument("--release", required=True, type=Path, help="release folder (layout in docs/layered_vqa.md)")
    b.add_argument("--out", required=True, type=Path, help=_OUT_HELP)
    b.add_argument("--name", help=_NAME_HELP)
    b.add_argument(
        "--tolerance",
        type=int,
        default=None,
        help="max pixel difference allowed between the layers' composite and the composite (default 2)",
    )
    b.set_defaults(fn=_build_release, command_name="build layered-vqa")

    s = builds.add_parser(
        "layered-synth", help="procedurally generated Layered-VQA scenes, plus the tasks that evaluate them"
    )
    s.add_argument("--scenes", required=True, type=int, help="number of scenes")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--size", type=_size, default=(320, 240), help="WIDTHxHEIGHT (default 320x240)")
    s.add_argument("--out", required=True, type=Path, help=_OUT_HELP)
    s.add_argument("--name", help=_NAME_HELP)
    s.set_defaults(fn=_build_synth, command_name="build layered-synth")


def _print_written(report, what: str) -> None:
    commands = evaluate_commands(report.written)
    print(f"wrote {report.rows} questions over {report.scenes} {what} to {report.out} (card: {report.card})")
    print(f"tasks: {', '.join(report.tasks)}; group: {', '.join(report.groups)} in {report.include_path}")
    print(
        "evaluate it with a multi-round model (simple class, batch size 1; others: --model scene_replay, docs/layered_vqa.md):"
    )
    print("  " + commands["model"])
    print("the blind baseline on it:")
    print("  " + commands["scene_blind"])


def _build_release(args) -> int:
    tol = compositing.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    report = build_release(args.release, args.out, tolerance=tol, source=str(args.release), name=args.name)
    worst = max(report.max_difference.items(), key=lambda kv: kv[1])
    _print_written(report, "scenes")
    print(f"recomposition: max pixel difference {worst[1]} (scene {worst[0]!r}), tolerance {tol}")
    return 0


def _build_synth(args) -> int:
    report = build_synthetic(args.out, args.scenes, args.seed, args.size, name=args.name)
    _print_written(report, "generated scenes")
    return 0


def register(sub) -> None:
    top = sub.add_parser(
        "layered-vqa",
        help="Layered-VQA tools (LLM-judge re-grading)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = top.add_subparsers(dest="layered_vqa_command", required=True, metavar="COMMAND")
    g = cmds.add_parser("grade", help="grade your own replies with the rule grader (verdict and reason per line)")
    g.add_argument(
        "--input",
        required=True,
        type=Path,
        help="JSON lines: id, gold, question_type, answer (optional: question, label)",
    )
    g.add_argument("--json", action="store_true", help="print one JSON document (grades and summary) instead of text")
    g.set_defaults(fn=_grade, command_name="layered-vqa grade")
    j = cmds.add_parser("judge", help="re-grade logged Layered-VQA outputs with LLM judges")
    j.add_argument("paths", nargs="+", type=Path, help="results folders or files (run with --log_samples)")
    j.add_argument(
        "--judges",
        required=True,
        help="';'-separated [provider:]name=model[@url] (see lmms_scene.judges.parse_judges); "
        "hf:PATH for a local transformers causal LM (a save_pretrained folder or a .gguf file)",
    )
    j.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the data the run used: a parquet file or a folder written by lmms-scene build. Checked against the run "
        "(question ids, texts, gold answers; a mismatch is refused); needed only for runs whose samples carry no question texts",
    )
    j.add_argument("--out", type=Path, default=None, help="write the judged rows and reports as JSON here")
    j.set_defaults(fn=_judge, command_name="layered-vqa judge")


def _grade(args) -> int:
    records = grader_io.read_answers(args.input)
    lemma_names, synonyms = scoring.default_lemma_names()
    out = grader_io.grade_answers(records, lemma_names)
    out["summary"]["grader"] = scoring.grader_provenance(synonyms)
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    for row in out["grades"]:
        mark = "" if "label" not in row else ("  (label: agrees)" if row["agrees"] else f"  (label: {row['label']})")
        cut = f"  ({row['answer_cut']})" if "answer_cut" in row else ""
        print(f"{row['id']}\t{row['verdict']}\t{row['reason']}{mark}{cut}")
    summ = out["summary"]
    counts = ", ".join(f"{v} {n}" for v, n in summ["verdicts"].items())
    print(f"{summ['n']} replies: {counts}; synonyms: {synonyms}")
    if "agreement" in summ:
        print(
            f"agreement with the labels: {summ['agreement']:.3f} ({round(summ['agreement'] * summ['labelled'])}/{summ['labelled']})"
        )
    return 0


def _run_data(data: Path) -> dict[str, dict]:
    """question_id -> the question's text, gold answer, type and scene in ``--data`` (a
    parquet file, or a folder written by ``lmms-scene build``)."""
    import pyarrow.parquet as pq  # deferred: pyarrow is heavy to import

    if Path(data).is_dir():
        files = sorted((Path(data) / "data").glob("*.parquet")) or sorted(Path(data).glob("*.parquet"))
        if not files:
            raise FileNotFoundError(f"--data: no parquet file in {data}/data or {data}")
    elif Path(data).is_file():
        files = [Path(data)]
    else:
        raise FileNotFoundError(f"--data: {data} not found")
    columns = ["question_id", "question", "answer", "question_type", "scene_id"]
    out: dict[str, dict] = {}
    for f in files:
        try:
            table = pq.read_table(f, columns=columns)
        except Exception as exc:
            raise ValueError(f"--data: {f} is not a Layered-VQA parquet file with columns {columns}: {exc}") from None
        for row in table.to_pylist():
            qid = row["question_id"]
            if qid in out and out[qid] != row:
                raise ValueError(f"--data: question {qid!r} appears twice with different contents ({f})")
            out[qid] = row
    return out


def data_mismatches(rows: list, data: dict[str, dict]) -> list[str]:
    """How the run's rows disagree with ``data``: a question id it lacks, another gold
    answer, type or scene, another question text (rows that log it) or, for rows from
    runs that did not log the text, a question of another length."""
    problems = []
    for r in rows:
        qid = r.get("question_id")
        d = data.get(qid)
        if d is None:
            problems.append(f"question {qid!r}: not in the data")
            continue
        for field in ("answer", "question_type", "scene_id"):
            if r.get(field) != d[field]:
                problems.append(f"question {qid!r}: {field} {r.get(field)!r} in the run, {d[field]!r} in the data")
        if r.get("question"):
            if r["question"] != d["question"]:
                problems.append(f"question {qid!r}: the run asked {r['question']!r}, the data has {d['question']!r}")
        elif r.get("evidence_length") is not None and r["evidence_length"] != len(d["question"]):
            problems.append(
                f"question {qid!r}: the run's question had {r['evidence_length']} characters, the data's {len(d['question'])}"
            )
    return problems


def _judge(args) -> int:
    panel = judges.parse_judges(args.judges)
    if not panel:
        raise ValueError("--judges: no judge given")
    loaded = results.load(args.paths)
    runs = [r for r in loaded.for_benchmark("layered_vqa") if r.samples]
    if not runs:
        raise FileNotFoundError(
            f"no Layered-VQA samples under {[str(p) for p in args.paths]} (run lmms_eval with --log_samples)"
        )
    data = _run_data(args.data) if args.data is not None else None
    # every run's rows, checked against the data before any judge is asked
    rows_of = {}
    for run in runs:
        rows = aggregation.expand_repeats(run.rows("layered_vqa_report"))
        if data is None:
            lacking = [r["question_id"] for r in rows if not r.get("question")]
            if lacking:
                raise ValueError(
                    f"{run.source}: {len(lacking)} rows carry no question text (a run from before lmms-scene logged it, "
                    f"first: {lacking[0]!r}); give --data, the data this run used (a built folder or its parquet file)"
                )
        else:
            problems = data_mismatches(rows, data)
            if problems:
                shown = "; ".join(problems[:3])
                raise ValueError(
                    f"--data {args.data} is not the data of {run.source}: {len(problems)} of {len(rows)} rows disagree ({shown})"
                )
        rows_of[id(run)] = rows
    questions = {qid: d["question"] for qid, d in data.items()} if data else None
    judged_by_model: dict[str, list] = {}
    reports = {}
    for run in runs:
        judged = judging.judge_rows(
            rows_of[id(run)], panel, model=run.model, model_args=run.model_args, questions=questions
        )
        judged_by_model.setdefault(run.label, []).extend(judged)
    for label, rows in judged_by_model.items():
        rep = aggregation.report([r for r in rows], n_boot=500)
        rep["judges"] = judging.judge_summary(rows)
        rep["scorer"] = judges.provenance(panel)
        reports[label] = rep
        acc = rep["overall"].get("accuracy")
        j = rep["judges"]
        print(
            f"{label}: judged accuracy {acc if acc is None else round(acc, 4)} over {rep['overall']['n']} rows; "
            f"{j['not_judged']} not sent to the judges ({j['not_judged_stopped']} stopped conversations, left out; "
            f"{j['not_judged_empty']} empty replies, wrong); "
            f"{j['no_consensus']} without consensus (left out), {j['failed_calls']} failed judge calls, "
            f"{j['unparsed_replies']} unparsed replies; self-judges excluded: {j['self_judges_excluded'] or 'none'} "
            f"({j['self_judgments']} self-judgments asked, kept for Figure 4)"
        )
    matrix = judging.self_preference(judged_by_model)
    cells = judging.self_cells(judged_by_model)
    print(
        "Figure 4: self-preference after cross-judging (share judged correct; rows: judge, columns: model; "
        "[boxed]: a model judging its own outputs, never counted in the consensus)"
    )
    print(judging.self_preference_table(matrix, cells))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            args.out,
            json.dumps(
                {"reports": reports, "self_preference": matrix, "self_cells": cells, "rows": judged_by_model},
                default=str,
                indent=1,
            ),
        )
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
