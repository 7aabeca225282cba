"""Agreement of the Layered-VQA grader with correctness labels on replies that real VLMs wrote.

    python bench/bench_real_replies.py SNAPSHOT_GIT_DIR [SNAPSHOT_GIT_DIR ...] [--commit C] [--git-ref REF] [--split dev|final|all]

Each SNAPSHOT_GIT_DIR is a `fetch` snapshot (a bare git directory) of a public repository
that commits model replies with a question, a gold answer and a correctness label; the
script recognises which one it is. Supported: ``alliedbrother/HALP_EACL`` @ 342e35c (eight
open VLMs on POPE / AMBER / HallusionBench yes/no questions, each reply reviewed by hand
as hallucinated or not; its Markdown reports hold the replies), ``zeyofu/BLINK_Benchmark``
@ 2d6a779 (19 VLMs' replies to BLINK's spatial-relation questions, choices "(A) yes (B)
no", labelled by the repository's own extracted letter) and
``KevinLuJian/MLLM_supplemental`` @ f67c822 (CogVLM's TallyQA counting answers, labelled
by the repository's own rule). The text is read from the snapshots and never written
anywhere: this script prints figures only (``--show-misses`` prints the disagreements,
for reading locally).

For every reply the grader (:func:`lmms_scene.metrics.layered_vqa.grader.grade`) is run,
today's and, with ``--git-ref``, the one at that commit ("before"). The source labels are
binary (right / not), so agreement is binary: the grader's ``correct`` against the rest
(``wrong`` or ``cannot_tell``); ``cannot_tell`` is counted apart. Printed: the
repositories and commits, agreement per source, model and answer kind, in scope (yes/no,
count, colour, shape, relation, short object answers) and out of it, the confusion table
with the wrong-graded-correct count first, and the refusals graded correct (a reply that
says it cannot tell and commits to no answer).

Labels the source got plainly wrong (the reply's explicit answer is the gold one and the
label says otherwise, or the other way round) are listed in ``ADJUDICATED`` with the
reason; figures are printed against the source labels and against the adjudicated ones.
The split: a stable hash of (model, question id) puts a fifth of the replies in ``final``,
measured once at the end; ``dev`` is the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HALP_FILES = (
    "Misc/mixed_hallucination_examples.md",
    "Misc/HALLUCINATION_ANALYSIS_REPORT.md",
    "Secondary_Scripts/detailed_probe_analysis/gemma_3_examples_per_type.md",
    "Secondary_Scripts/detailed_probe_analysis/gemma_hallucination_detection_patterns.md",
    "Secondary_Scripts/detailed_probe_analysis/gemma_probe_comparison.md",
)
#: (model, question id) -> (label, why): source labels that contradict the reply's own answer
#: (HALP_EACL labels "hallucinated" also for a right answer that mentions something not in
#: the image; these are the disagreements read one by one, on the development split only)
ADJUDICATED: dict[tuple[str, str], tuple[str, str]] = {
    ("Gemma3-12B", "question_comb_5053"): ("correct", "says the floor is clean, no dirt: no, the gold"),
    ("Gemma3-12B", "question_comb_6041"): ("correct", "'So, no, it's not ...': no, the gold"),
    ("Gemma3-12B", "question_comb_5716"): ("wrong", "opens with 'Yes.', gold no"),
    ("FastVLM-7B", "question_comb_3742"): ("wrong", "'not in direct contact', gold yes"),
    ("FastVLM-7B", "question_comb_3721"): ("wrong", "'not in direct contact', gold yes"),
    ("FastVLM-7B", "question_comb_7004"): ("wrong", "'there is no football visible', gold yes"),
    ("LLaVA-Next-8B", "question_comb_7062"): ("correct", "'does not flow through Russia': no, the gold"),
    ("LLaVA-Next-8B", "question_comb_1057"): ("correct", "'is not curved. It is a straight line': no, the gold"),
    ("Qwen2.5-VL-7B", "question_comb_3816"): ("wrong", "opens with 'No', gold yes"),
    ("Qwen2.5-VL-7B", "question_comb_1561"): ("wrong", "opens with 'No', gold yes"),
    ("SmolVLM2-2.2B", "question_comb_3880"): ("correct", "'No, Asians were not the largest group': no, the gold"),
    ("SmolVLM2-2.2B", "question_comb_3479"): ("wrong", "opens with 'No', gold yes"),
    ("SmolVLM2-2.2B", "question_comb_1535"): ("correct", "'No.': no, the gold"),
    ("SmolVLM2-2.2B", "question_comb_1177"): ("wrong", "'No', gold yes"),
    # BLINK: the source's letter extraction found no letter ("(Z)") in a reply that answers in words
    ("OPUS", "val_Spatial_Relation_121"): (
        "correct",
        "opens with 'No, ...', gold no; no option letter for the source's extractor",
    ),
}

_REFUSAL = re.compile(
    r"\b(cannot|can't|unable to|not able to|don't have|do not have|not possible to|impossible to)\b.{0,40}\b(tell|determine|answer|see|provide|know|data|information|access|identify|confirm)",
    re.IGNORECASE,
)


def _show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def _gold(text: str) -> str:
    t = text.strip().strip(">").strip()
    if re.fullmatch(r"y\s*,\s*e\s*,\s*s", t, re.IGNORECASE):
        return "yes"
    if re.fullmatch(r"n\s*,\s*o", t, re.IGNORECASE):
        return "no"
    return t


_MODEL_ALIASES = {
    "qwen2.5-vl-7b": "Qwen2.5-VL-7B",
    "gemma 3 12b": "Gemma3-12B",
    "gemma3-12b": "Gemma3-12B",
    "molmo-7b": "Molmo-V1",
    "molmo-v1": "Molmo-V1",
    "llava-next": "LLaVA-Next-8B",
    "llava-next-8b": "LLaVA-Next-8B",
}


def _model_name(header: str) -> str:
    h = header.strip().strip("#").strip()
    return _MODEL_ALIASES.get(h.lower(), h)


def halp_records(git_dir: str, commit: str) -> list[dict]:
    """The replies in HALP_EACL's Markdown reports: model, question id, question, gold, reply, label."""
    out: dict[tuple[str, str], dict] = {}
    for path in HALP_FILES:
        try:
            text = _show(git_dir, commit, path)
        except subprocess.CalledProcessError:
            continue
        model = "Gemma3-12B" if "gemma" in path.lower() else ""
        lines = text.splitlines()
        cur: dict | None = None
        field = None
        pending = None

        def close(cur: dict | None) -> None:
            if cur and cur.get("qid") and cur.get("answer") is not None and cur.get("label") and cur.get("gold"):
                rec = {**cur, "answer": "\n".join(cur["answer"]).strip()}
                out.setdefault((rec["model"], rec["qid"]), rec)

        for line in lines:
            if cur is None and line.strip().startswith(("#### ✅", "#### ❌")):
                pending = "correct" if "✅" in line else "wrong"
                continue
            if line.startswith("## ") and not line.startswith("### "):
                name = line[3:].strip()
                if not name.lower().startswith(("basic", "executive", "model perf", "review", "qualitative")):
                    model = _model_name(name) if "gemma" not in path.lower() else model
                continue
            m = re.match(r"^-?\s*\*\*Question ID:\*\*\s*`([^`]+)`", line.strip())
            if m:
                close(cur)
                cur = {"model": model, "qid": m.group(1), "answer": None, "source_file": path}
                if pending:
                    cur["label"] = pending
                pending, field = None, None
                continue
            if cur is None:
                continue
            s = line.strip()
            m = re.match(
                r"^-?\s*\*\*(Question|Ground Truth|Model Answer|True Label|Status|Basic Hallucination Type|Domain Type|Image|Probe Predictions):\*\*\s*(.*)$",
                s,
            )
            if m:
                key, val = m.group(1), m.group(2).strip()
                field = None
                if key == "Question":
                    cur["question"] = val
                elif key == "Ground Truth":
                    if val:
                        cur["gold"] = _gold(val)
                    else:
                        field = "gold"
                elif key == "Model Answer":
                    cur["answer"] = [val] if val else []
                    field = "answer"
                elif key == "True Label":
                    cur["label"] = "correct" if val.lower().startswith("no hallucination") else "wrong"
                elif key == "Status":
                    cur["label"] = (
                        "wrong"
                        if "HALLUCINATED" in val and "NOT" not in val.upper().split("HALLUCINATED")[0]
                        else "correct"
                    )
                elif key == "Domain Type":
                    cur["domain"] = val
                continue
            if s.startswith(("#### ✅", "#### ❌")):
                close(cur)
                cur, field = None, None
                pending = "correct" if s.startswith("#### ✅") else "wrong"
                continue
            if s == "---" or s.startswith("### ") or s.startswith("#### "):
                close(cur)
                cur, field = None, None
                continue
            if field == "gold" and s:
                cur["gold"] = _gold(s)
                field = None
            elif field == "answer":
                cur["answer"].append(line.removeprefix("> "))
        close(cur)
    return list(out.values())


#: KevinLuJian/MLLM_supplemental: CogVLM's TallyQA counting answers (the file as committed
#: before it grew past the snapshot's 4 MiB limit), labelled by the repository's own rule
#: (eval_script/normalize_answer.py + TallyQA_eval.py: dots and spaces dropped, lower case,
#: a number word or numeral read as an integer, then equal to the labelled count)
TALLY_FILE, TALLY_COMMIT = "evaluation_results/TallyQA/TallyQA_CogVLM.jsonl", "f67c822a63ea252c5c019e0da8fda086aab2f511"
_TALLY_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
        ]
    )
}
_TALLY_WORDS.update({"none": 0, "no": 0})


def _tally_label(predicted: str, labelled) -> str:
    p = predicted.replace(".", "").replace(" ", "").lower()
    value = int(p) if p.isnumeric() else _TALLY_WORDS.get(p, p)
    return "correct" if value == labelled else "wrong"


def tally_records(git_dir: str, commit: str = TALLY_COMMIT) -> list[dict]:
    import json

    out = []
    for line in _show(git_dir, commit, TALLY_FILE).splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        gold = str(r["labeled_answer"])
        out.append(
            {
                "model": r.get("model_id", "CogVLM"),
                "qid": f"tally-{r['question_index']}",
                "question": r["question"],
                "gold": gold,
                "answer": str(r["predicted_answer"]),
                "label": _tally_label(str(r["predicted_answer"]), r["labeled_answer"]),
                "source_file": TALLY_FILE,
            }
        )
    return out


#: zeyofu/BLINK_Benchmark: every model's replies to BLINK's Spatial_Relation questions
#: (eval/saved_outputs/<model>/Spatial[ _]Relation.json, val split), whose choices are always
#: "(A) yes (B) no"; the source's label is its own extracted `prediction` equal to `answer`
#: (eval/evaluate.py). The question texts are not in the repository: the grader is given the
#: choice line alone, so a reply is read without the question's words.
BLINK_COMMIT = "2d6a779"
BLINK_CHOICES = "Select from the following choices. (A) yes (B) no"


def blink_records(git_dir: str, commit: str = BLINK_COMMIT) -> list[dict]:
    import json

    names = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit, "eval/saved_outputs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    out = []
    for path in names:
        parts = path.split("/")
        if (
            len(parts) != 4
            or parts[3] not in ("Spatial Relation.json", "Spatial_Relation.json")
            or "concatenate" in parts[2]
        ):
            continue
        data = json.loads(_show(git_dir, commit, path))
        for x in data.get("val", []) if isinstance(data, dict) else data:
            if x.get("answer") not in ("(A)", "(B)") or not isinstance(x.get("full_prediction"), str):
                continue
            out.append(
                {
                    "model": parts[2],
                    "qid": x["idx"],
                    "question": BLINK_CHOICES,
                    "gold": "Yes." if x["answer"] == "(A)" else "No.",
                    "answer": x["full_prediction"],
                    "label": "correct" if x.get("prediction") == x["answer"] else "wrong",
                    "source_file": path,
                }
            )
    return out


def records(git_dir: str, commit: str | None) -> tuple[str, str, list[dict]]:
    """(repository, commit, replies) of the snapshot, whichever supported repository it is."""
    has_blink = (
        subprocess.run(
            ["git", "--git-dir", git_dir, "cat-file", "-e", f"{commit or BLINK_COMMIT}:eval/evaluate.py"],
            capture_output=True,
        ).returncode
        == 0
    )
    if has_blink:
        c = commit or BLINK_COMMIT
        return "zeyofu/BLINK_Benchmark", c, blink_records(git_dir, c)
    has_tally = (
        subprocess.run(
            ["git", "--git-dir", git_dir, "cat-file", "-e", f"{commit or TALLY_COMMIT}:{TALLY_FILE}"],
            capture_output=True,
        ).returncode
        == 0
    )
    if has_tally:
        c = commit or TALLY_COMMIT
        return "KevinLuJian/MLLM_supplemental", c, tally_records(git_dir, c)
    c = commit or "342e35ccd6b2524456433b2a73701fd5dd49afca"
    return "alliedbrother/HALP_EACL", c, halp_records(git_dir, c)


def _grader_at(ref: str | None):
    if ref is None:
        from lmms_scene.metrics.layered_vqa import grader

        return grader
    source = subprocess.run(
        ["git", "show", f"{ref}:lmms_scene/metrics/layered_vqa/grader.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "grader_at_ref.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("grader_at_ref", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["grader_at_ref"] = module
    spec.loader.exec_module(module)
    return module


def _split(rec: dict) -> str:
    h = int(hashlib.sha256(f"{rec['model']}|{rec['qid']}".encode()).hexdigest(), 16)
    return "final" if h % 5 == 0 else "dev"


def _question_type(rec: dict) -> str:
    q = (rec.get("question") or "").lower()
    if rec.get("source_file") == TALLY_FILE:
        return "counting"
    if rec.get("question") == BLINK_CHOICES:
        return "spatial"
    return "counting" if q.startswith("how many") else "direct ask"


def _in_scope(kind: str, gold: str) -> bool:
    """The grader's scope: yes/no, counts, colours, shapes, relations and short object
    answers; a list of things to describe ("woman, microphone, stage") is not one answer."""
    return kind != "object" or (len(gold.split()) <= 4 and "," not in gold)


def measure(grader, recs: list[dict], label_key: str) -> dict:
    by = defaultdict(lambda: [0, 0])
    conf = Counter()
    refusal_correct = 0
    for r in recs:
        g = grader.grade(r["answer"], r["gold"], _question_type(r), r.get("question"))
        kind = grader.answer_kind(r["gold"], _question_type(r))
        scope = "in scope" if _in_scope(kind, r["gold"]) else "out of scope"
        label = r[label_key]
        ok = (g.verdict == "correct") == (label == "correct")
        for key in (("all",), ("scope", scope), ("model", r["model"]), ("kind", kind), ("source", r["source"])):
            by[key][0] += ok
            by[key][1] += 1
        conf[(scope, label, g.verdict)] += 1
        # a refusal graded correct: says it cannot tell and commits to no answer (an "I can't
        # tell ... So the answer is (B), No." commits, as the issue reads it)
        committed = any(
            k in g.reason for k in ("stated final answer", "option letter", "opens with", "the stated answer")
        )
        if g.verdict == "correct" and _REFUSAL.search(r["answer"]) and not committed:
            refusal_correct += 1
            r.setdefault("flags", []).append("refusal graded correct")
        if not ok:
            r.setdefault("misses", []).append((label, g.verdict, g.reason))
    return {"by": by, "conf": conf, "refusal_correct": refusal_correct}


def _print(name: str, res: dict) -> None:
    by, conf = res["by"], res["conf"]
    a, n = by[("all",)]
    print(f"  {name}: {a}/{n} agree ({100 * a / max(n, 1):.1f} %)")
    for scope in ("in scope", "out of scope"):
        a, n = by[("scope", scope)]
        if n:
            wgc = conf[(scope, "wrong", "correct")]
            print(
                f"    {scope}: {a}/{n} ({100 * a / n:.1f} %); wrong graded correct {wgc}; "
                f"correct graded wrong {conf[(scope, 'correct', 'wrong')]}; cannot_tell on correct {conf[(scope, 'correct', 'cannot_tell')]}, on wrong {conf[(scope, 'wrong', 'cannot_tell')]}"
            )
    print("    per source: " + ", ".join(f"{k[1]} {a}/{n}" for k, (a, n) in sorted(by.items()) if k[0] == "source"))
    print("    per model: " + ", ".join(f"{k[1]} {a}/{n}" for k, (a, n) in sorted(by.items()) if k[0] == "model"))
    print("    per kind: " + ", ".join(f"{k[1]} {a}/{n}" for k, (a, n) in sorted(by.items()) if k[0] == "kind"))
    print(f"    refusals graded correct: {res['refusal_correct']}")
    print("    confusion (label -> verdict), wrong graded correct first:")
    for label, verdict in (
        ("wrong", "correct"),
        ("wrong", "wrong"),
        ("wrong", "cannot_tell"),
        ("correct", "correct"),
        ("correct", "wrong"),
        ("correct", "cannot_tell"),
    ):
        print(
            f"      {label:7s} -> {verdict:11s} {sum(v for (s, lab, ver), v in conf.items() if lab == label and ver == verdict)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "snapshot",
        nargs="+",
        help="fetch snapshots' git directories (alliedbrother/HALP_EACL, KevinLuJian/MLLM_supplemental)",
    )
    ap.add_argument(
        "--commit",
        help="the snapshot commit to read (default: the one the figures in docs/layered_vqa.md were read at)",
    )
    ap.add_argument("--git-ref", help="also measure the grader as it was at this commit of lmms-scene ('before')")
    ap.add_argument("--split", choices=("dev", "final", "all"), default="dev")
    ap.add_argument(
        "--show-misses", action="store_true", help="print each disagreement (reads the replies; for local study only)"
    )
    args = ap.parse_args()
    recs, heads = [], []
    for snap in args.snapshot:
        repo, commit, rs = records(snap, args.commit)
        heads.append(f"{repo} @ {commit} ({len(rs)} replies)")
        for r in rs:
            r["source"] = repo
        recs += rs
    for r in recs:
        r["split"] = _split(r)
        r["source_label"] = r["label"]
        r["adjudicated"] = ADJUDICATED.get((r["model"], r["qid"]), (r["label"], ""))[0]
    chosen = [r for r in recs if args.split == "all" or r["split"] == args.split]
    print("; ".join(heads))
    print(
        f"{len(recs)} replies of {len({r['model'] for r in recs})} models; "
        f"split {args.split}: {len(chosen)}; labels {dict(Counter(r['label'] for r in chosen))}; "
        f"adjudicated {sum(r['adjudicated'] != r['source_label'] for r in chosen)}"
    )
    graders = {"today": _grader_at(None)}
    if args.git_ref:
        graders = {f"at {args.git_ref}": _grader_at(args.git_ref), **graders}
    for name, grader in graders.items():
        for key in ("source_label", "adjudicated"):
            for r in chosen:
                r.pop("misses", None)
            res = measure(grader, chosen, key)
            _print(f"grader {name} vs {key}", res)
            if args.show_misses and name == "today" and key == "adjudicated":
                for r in chosen:
                    for m in r.get("misses", []):
                        print(
                            "MISS",
                            r["model"],
                            r["qid"],
                            m,
                            "|",
                            r.get("question"),
                            "| gold:",
                            r["gold"],
                            "|",
                            r["answer"][:400].replace("\n", " "),
                        )


if __name__ == "__main__":
    main()
