"""Throughput of CESG with the offline default pipeline on one thread, per stage.

Pairs: SNUS-style negative captions generated here (3-4 sentences, about 30 words),
each reference met by ``--per-ref`` different predictions (as a run over several
models meets it), every prediction text unique (no memo hits on predictions).
Reported: pairs/s of single ``cesg_score`` calls (references cached after their first
build, as in a run; and cold, caches empty), of the corpus path ``score_corpus`` (what the
task and ``lmms-scene cesg`` use: graphs built in batches), and ms per caption per stage
(I coref, II strip, III split, IV parse, V+VI compare/combine, matching with MiniLM).

The per-stage figures time each component on its own (coref parses texts with a pronoun);
the end-to-end figures use the default pipeline's one-parse shortcut (coref reads the
sentence parses), so they are not the sum of the stages.

Usage: python bench/bench_cesg.py [--pairs 400 --per-ref 4]
Prints one JSON object. Goal: >= 200 pairs/s. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import random
import time


def captions(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    people = ["worker", "welder", "roofer", "flagger", "electrician", "painter", "driver", "cook"]
    places = ["scaffold", "roof", "road", "ladder", "platform", "dock", "bench", "stove"]
    worn = ["a helmet", "gloves", "goggles", "a harness", "a safety vest", "a face shield", "ear protection"]
    things = ["guardrail", "warning sign", "fire extinguisher", "safety net", "traffic cone", "first aid kit", "exit sign"]
    attrs = [("ladder", "secured"), ("floor", "dry"), ("cable", "insulated"), ("exit", "marked"), ("machine", "guarded")]
    out = []
    for i in range(n):
        p, w = rng.choice(people), rng.choice(places)
        parts = [f"The {p} on the {w} is not wearing {rng.choice(worn)} or {rng.choice(worn)}."]
        parts.append(f"There is no {rng.choice(things)} near the {w}.")
        a = rng.choice(attrs)
        parts.append(f"The {a[0]} is not {a[1]}.")
        if rng.random() < 0.5:
            parts.append(f"They do not have {rng.choice(worn)} and the {rng.choice(things)} is missing.")
        out.append(" ".join(parts) + f" ({i})" * 0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--per-ref", type=int, default=4)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from lmms_scene import cache
    from lmms_scene.metrics.cesg import cesg_score, score_corpus
    from lmms_scene.metrics.cesg.construct import combine, compare, default_pipeline
    from lmms_scene.nlp.encoders import sentence_encoder

    n_refs = max(1, args.pairs // args.per_ref)
    refs = captions(n_refs, seed=1)
    preds = captions(args.pairs, seed=2)
    # unique predictions: one extra clause each
    preds = [p.replace(" near the", f" near the {i % 97}th", 1) if i % 2 else p.replace("is not", "isn't", 1) + f" There is no rail {i}." for i, p in enumerate(preds)]
    pairs = [(preds[i], refs[i % n_refs]) for i in range(args.pairs)]

    pipe = default_pipeline()
    sentence_encoder().encode(["warm up"])
    cesg_score("They have no rail.", "The worker has no rail. He is not wearing it.")  # load everything (WordNet too)

    # per-stage timing on the predictions (each a fresh text)
    texts = preds[: min(200, len(preds))]
    t = {}
    start = time.perf_counter()
    resolved = [pipe.coref.resolve(x) for x in texts]
    t["I_coref"] = time.perf_counter() - start
    start = time.perf_counter()
    split = [pipe.split(x) for x in resolved]
    t["III_split"] = time.perf_counter() - start
    start = time.perf_counter()
    aff = [[pipe.strip(s) for s in ss] for ss in split]
    t["II_strip"] = time.perf_counter() - start
    start = time.perf_counter()
    parsed = [pipe.parser.parse_pairs(ss, aa) for ss, aa in zip(split, aff)]
    t["IV_parse"] = time.perf_counter() - start
    start = time.perf_counter()
    [combine([compare(*g) for g in gs]) for gs in parsed]
    t["V_VI_compare_combine"] = time.perf_counter() - start
    per_caption_ms = {k: round(1000 * v / len(texts), 3) for k, v in t.items()}

    def run(label: str) -> float:
        start = time.perf_counter()
        for p, r in pairs:
            cesg_score(p, r)
        return len(pairs) / (time.perf_counter() - start)

    cache.memo_namespace("cesg.build").clear()
    cache.memo_namespace("encoder:all-MiniLM-L6-v2").clear()
    cold = run("cold")  # every reference and prediction built once, embeddings computed
    # warm: new predictions against the now-cached references (a second model's run)
    preds2 = [p + " The floor is not dry." for p, _ in pairs]
    pairs[:] = [(p, r) for p, (_, r) in zip(preds2, pairs)]
    warm = run("warm")
    # matching alone: both graphs cached, embeddings cached
    start = time.perf_counter()
    for p, r in pairs:
        cesg_score(p, r)
    matching = len(pairs) / (time.perf_counter() - start)
    # the corpus path the task and `lmms-scene cesg` use: graphs built in batches
    pairs3 = [(f"{i}", p + " The cable is not insulated.", [r]) for i, (p, r) in enumerate(pairs)]
    start = time.perf_counter()
    score_corpus(pairs3)
    corpus_cached_refs = len(pairs3) / (time.perf_counter() - start)
    cache.memo_namespace("cesg.build").clear()
    cache.memo_namespace("encoder:all-MiniLM-L6-v2").clear()
    pairs4 = [(f"{i}", p + " The machine is not guarded.", [r]) for i, (p, r) in enumerate(pairs)]
    start = time.perf_counter()
    score_corpus(pairs4)
    corpus_cold = len(pairs4) / (time.perf_counter() - start)
    words = sum(len(p.split()) for p, _ in pairs) / len(pairs)
    sentences = sum(len(pipe.split(p)) for p, _ in pairs) / len(pairs)
    print(json.dumps({
        "pairs": len(pairs), "references": n_refs, "threads": 1,
        "prediction_words_mean": round(words, 1), "prediction_sentences_mean": round(sentences, 2),
        "pairs_per_s_cold": round(cold, 1),
        "pairs_per_s_references_cached": round(warm, 1),
        "pairs_per_s_all_cached_matching_only": round(matching, 1),
        "corpus_path_pairs_per_s_cold": round(corpus_cold, 1),
        "corpus_path_pairs_per_s_references_cached": round(corpus_cached_refs, 1),
        "ms_per_caption_by_stage": per_caption_ms,
        "goal_pairs_per_s": 200,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
