"""Agreement of judge-verdict parsers with the labelled replies in tests/data/judge_verdicts.jsonl.

    python bench/bench_verdicts.py                  # lmms-scene's parse_verdict and lmms-eval's yes/no parser
    python bench/bench_verdicts.py --git-ref 9514078  # also lmms_scene/judges.py as it was at that commit

Prints, per parser, how many replies it reads as labelled, how many it reads as yes where
the label is not yes (the costly error: a wrong answer scored right), and as no where the
label is not no; then the same per source (written, issue, smollm2, heldout).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABELS = {"yes": True, "no": False, None: None}


def _old_parser(ref: str):
    source = subprocess.run(
        ["git", "show", f"{ref}:lmms_scene/judges.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "judges_at_ref.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("judges_at_ref", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["judges_at_ref"] = module
    spec.loader.exec_module(module)
    return module.parse_verdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-ref", help="also measure lmms_scene/judges.py's parse_verdict at this commit")
    args = ap.parse_args()
    from lmms_eval.llm_judge.utils import ResponseParser

    from lmms_scene.judges import parse_verdict

    rows = [
        json.loads(x) for x in (ROOT / "tests" / "data" / "judge_verdicts.jsonl").read_text().splitlines() if x.strip()
    ]
    parsers = {
        "lmms_scene.judges.parse_verdict": parse_verdict,
        "lmms-eval ResponseParser.parse_binary_response(yes/no)": lambda t: ResponseParser.parse_binary_response(
            t, "yes/no"
        ),
    }
    if args.git_ref:
        parsers[f"parse_verdict at {args.git_ref}"] = _old_parser(args.git_ref)
    print(
        f"{len(rows)} labelled replies: "
        + ", ".join(f"{sum(r['verdict'] == k for r in rows)} {k or 'none'}" for k in ("yes", "no", None))
    )
    for name, fn in parsers.items():
        by_source = defaultdict(lambda: [0, 0])
        agree = wrong_yes = wrong_no = 0
        for r in rows:
            got, want = fn(r["reply"]), LABELS[r["verdict"]]
            ok = got is want
            agree += ok
            wrong_yes += got is True and want is not True
            wrong_no += got is False and want is not False
            by_source[r["source"]][0] += ok
            by_source[r["source"]][1] += 1
        per = ", ".join(f"{s} {a}/{n}" for s, (a, n) in sorted(by_source.items()))
        print(
            f"{name}: {agree}/{len(rows)} as labelled; yes where not yes: {wrong_yes}; no where not no: {wrong_no} ({per})"
        )


if __name__ == "__main__":
    main()
