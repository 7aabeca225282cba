"""Throughput of CESG (offline default pipeline, one torch thread), against the
implementation at a previous commit (``--previous``, default f6cd88e: before issue 28) in
the same run, on the same pairs. Prints the load average before and after.

Pairs: SNUS-style negative captions generated here (3-4 sentences, about 30 words), each
reference met by ``--per-ref`` different predictions (as a run over several models
meets it), every prediction text unique (no memo hits on whole predictions; sentences
do repeat, as in real model outputs).

Figures (pairs/s): ``corpus_cold`` is ``score_corpus`` (what the task, ``lmms-scene cesg``
and the evaluate module use) with nothing parsed or embedded yet (models loaded), with its
default ``workers="auto"`` (graphs built and rows matched in as many processes as there
are CPUs, up to 4; ``corpus_cold_one_process`` is the same with ``workers=1``;
``corpus_cold_one_process_per_cpu_s`` the same again per CPU second of the process,
``time.process_time``: the figure a loaded machine moves least);
``corpus_references_cached`` a second model's run (references built); ``single_cold``
and ``single_references_cached`` the same through one ``cesg_score`` call per pair.
The previous implementation runs in a subprocess from ``git archive`` of that commit
(same machine, same pairs, same measuring code, one after the other); the ratio is the
figure to read, the absolute numbers move with the machine's load.

Usage: python bench/bench_cesg.py [--pairs 400 --per-ref 4 --previous f6cd88e | --no-previous]
Prints one JSON object. Goal: corpus_cold >= 300 pairs/s on the 2-core development
machine. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def captions(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    people = ["worker", "welder", "roofer", "flagger", "electrician", "painter", "driver", "cook"]
    places = ["scaffold", "roof", "road", "ladder", "platform", "dock", "bench", "stove"]
    worn = ["a helmet", "gloves", "goggles", "a harness", "a safety vest", "a face shield", "ear protection"]
    things = [
        "guardrail",
        "warning sign",
        "fire extinguisher",
        "safety net",
        "traffic cone",
        "first aid kit",
        "exit sign",
    ]
    attrs = [
        ("ladder", "secured"),
        ("floor", "dry"),
        ("cable", "insulated"),
        ("exit", "marked"),
        ("machine", "guarded"),
    ]
    out = []
    for _ in range(n):
        p, w = rng.choice(people), rng.choice(places)
        parts = [f"The {p} on the {w} is not wearing {rng.choice(worn)} or {rng.choice(worn)}."]
        parts.append(f"There is no {rng.choice(things)} near the {w}.")
        a = rng.choice(attrs)
        parts.append(f"The {a[0]} is not {a[1]}.")
        if rng.random() < 0.5:
            parts.append(f"They do not have {rng.choice(worn)} and the {rng.choice(things)} is missing.")
        out.append(" ".join(parts))
    return out


def make_pairs(n_pairs: int, per_ref: int) -> list[list]:
    n_refs = max(1, n_pairs // per_ref)
    refs = captions(n_refs, seed=1)
    preds = captions(n_pairs, seed=2)
    # unique predictions: one changed clause each
    preds = [
        p.replace(" near the", f" near the {i % 97}th", 1)
        if i % 2
        else p.replace("is not", "isn't", 1) + f" There is no rail {i}."
        for i, p in enumerate(preds)
    ]
    return [[str(i), preds[i], [refs[i % n_refs]]] for i in range(n_pairs)]


#: the measuring code, run in this process for today's implementation and in a subprocess
#: for the previous one (it uses only APIs both have: score_corpus, cesg_score, cache)
MEASURE = r"""
import json, os, sys, time
if os.environ.get("BENCH_NO_EDITABLE"):
    # the previous commit's package is first on PYTHONPATH; the editable install's finder
    # would still win, so take it out
    sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "") + repr(f)]
import torch
torch.set_num_threads(1)
from lmms_scene import cache
from lmms_scene.metrics.cesg import cesg_score, score_corpus
from lmms_scene.nlp.encoders import sentence_encoder

pairs = json.load(open(sys.argv[1]))
sentence_encoder().encode(["warm up"])
cesg_score("They have no rail.", "The worker has no rail. He is not wearing it.")  # load everything (WordNet too)

def cold():
    for name in ("cesg.build", "cesg.sentence", "encoder:all-MiniLM-L6-v2", "captioning.factual_graph"):
        cache.memo_namespace(name).clear()

def timed(fn):
    start = time.perf_counter()
    fn()
    return len(pairs) / (time.perf_counter() - start)

def cpu_timed(fn):
    # pairs per CPU second of this process (one process: what load on the machine moves least)
    start = time.process_time()
    fn()
    return len(pairs) / (time.process_time() - start)

out = {}
cold()
out["corpus_cold"] = timed(lambda: score_corpus([(i, p, r) for i, p, r in pairs]))
second = [(i, p + " The floor is not dry.", r) for i, p, r in pairs]  # a second model: references built
out["corpus_references_cached"] = timed(lambda: score_corpus(second))
cold()
try:  # today's one-process path (older commits have no workers option)
    out["corpus_cold_one_process"] = timed(lambda: score_corpus([(i, p, r) for i, p, r in pairs], workers=1))
    cold()
    out["corpus_cold_one_process_per_cpu_s"] = cpu_timed(
        lambda: score_corpus([(i, p, r) for i, p, r in pairs], workers=1)
    )
except TypeError:  # before workers: the corpus path ran in one process
    cold()
    out["corpus_cold_one_process_per_cpu_s"] = cpu_timed(lambda: score_corpus([(i, p, r) for i, p, r in pairs]))
cold()
out["single_cold"] = timed(lambda: [cesg_score(p, r) for _, p, r in pairs])
third = [(i, p + " The cable is not insulated.", r) for i, p, r in pairs]
out["single_references_cached"] = timed(lambda: [cesg_score(p, r) for _, p, r in third])
means = score_corpus([(i, p, r) for i, p, r in pairs])["means"]
out["corpus_CESG"] = means["CESG"]
import lmms_scene
out["package"] = lmms_scene.__file__
print("BENCH " + json.dumps(out))
"""


def run_here(path: Path) -> dict:
    env = {**os.environ, "LMMS_SCENE_NO_PROGRESS": "1"}
    return _run(path, env)


def _run(path: Path, env: dict) -> dict:
    # run outside the checkout: `python -c` puts the working folder first on sys.path
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3000,
        cwd=path.parent,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        raise RuntimeError(f"measurement failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line[6:])


def run_previous(path: Path, commit: str) -> dict:
    """The same measurement on ``commit``'s lmms_scene (git archive into a temporary folder,
    first on PYTHONPATH, so it shadows the editable install)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit, "lmms_scene", "tasks", "templates"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        env = {**os.environ, "PYTHONPATH": tmp, "LMMS_SCENE_NO_PROGRESS": "1", "BENCH_NO_EDITABLE": "1"}
        return _run(path, env)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--per-ref", type=int, default=4)
    ap.add_argument("--previous", default="f6cd88e", help="commit of the implementation to compare with")
    ap.add_argument("--no-previous", action="store_true")
    args = ap.parse_args()
    load_before = list(os.getloadavg())
    pairs = make_pairs(args.pairs, args.per_ref)
    words = sum(len(p.split()) for _, p, _ in pairs) / len(pairs)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pairs.json"
        path.write_text(json.dumps(pairs))
        ours = run_here(path)
        previous = None if args.no_previous else run_previous(path, args.previous)
    out = {
        "pairs": len(pairs),
        "references": max(1, args.pairs // args.per_ref),
        "threads": 1,
        "prediction_words_mean": round(words, 1),
        "ours_pairs_per_s": {
            k: round(v, 1) if isinstance(v, float) and k != "corpus_CESG" else v for k, v in ours.items()
        },
    }
    if previous is not None:
        out[f"previous_{args.previous}_pairs_per_s"] = {
            k: round(v, 1) if isinstance(v, float) and k != "corpus_CESG" else v for k, v in previous.items()
        }
        out["speedup"] = {
            k: round(ours[k] / previous[k], 2) for k in ours if k not in ("corpus_CESG", "package") and previous.get(k)
        }
    out["goal_corpus_cold_pairs_per_s"] = 300
    out["load_average_before_after"] = [load_before, list(os.getloadavg())]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
