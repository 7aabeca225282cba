"""Benchmark of COOCO's scoring and image pipeline on the CPU.

1. RefCLIPScore throughput (samples/s) of :func:`lmms_scene.metrics.clip.ref_clip_score`
   with a random-weight CLIP of ViT-B/32 size (the default ``CLIPConfig``: ViT-B/32
   vision tower at 224 px, 12-layer 512-d text tower, 512-d projection), against
   torchmetrics' ``CLIPScore`` on the same model object and the same data, in the
   same run. Labels repeat as in COOCO (names drawn from a small vocabulary), so our
   text-embedding cache matters; ``ours_clip_score`` (image + candidate, the same work
   as torchmetrics) and the first, cold-cache pass are reported too, as is the
   per-row call lmms-eval's ``process_results`` makes (batch of 1), and that call over
   the noise grid (each item's noise-free crop scored 6 times, encoded once).
2. Cost per image of grey padding + Gaussian noise on a 640 x 480 image (COCO's
   usual size), for each noise area.

Usage: python bench/bench_cooco.py [--n 64 --batch 32 --threads 2]
Prints one JSON object. Timing figures are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
NAMES = [
    "cup",
    "laptop",
    "ham",
    "oven",
    "bowl",
    "box",
    "notebook",
    "toilet",
    "towel",
    "anchor",
    "bicycle",
    "chair",
    "cake",
    "fork",
    "spoon",
    "candle",
    "hammer",
    "clock",
    "pillow",
    "guitar",
    "shovel",
    "sink",
    "car",
    "stop sign",
    "potted plant",
    "keyboard",
    "mouse",
    "knife",
    "tv",
    "microwave",
]


MODEL_NAME = "bench/random-clip-vit-b-32"


def build_clip(path: Path):
    """A random CLIP of ViT-B/32 size with the test kit's offline tokenizer, built in
    memory (saving 600 MB only to load it back would dominate the run)."""
    sys.path.insert(0, str(REPO / "tests"))
    import torch
    from kit import build_tiny_clip
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizerFast,
    )

    build_tiny_clip(path / "tok")  # only for its offline tokenizer files
    tokenizer = CLIPTokenizerFast.from_pretrained(path / "tok")
    processor = CLIPProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}),
        tokenizer=tokenizer,
    )
    config = CLIPConfig()  # defaults: ViT-B/32 sizes
    config.text_config.vocab_size = max(len(tokenizer), 1000)
    config.text_config.eos_token_id = tokenizer.eos_token_id
    config.text_config.bos_token_id = tokenizer.bos_token_id
    config.text_config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(0)
    model = CLIPModel(config).eval()
    return model, processor


def data(n: int, seed: int = 0):
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    images = [
        Image.fromarray(np_rng.integers(0, 256, (rng.randint(60, 200), rng.randint(60, 200), 3), dtype=np.uint8))
        for _ in range(n)
    ]
    candidates = [f"A photo depicts a {rng.choice(NAMES)}" for _ in range(n)]
    references = [[f"A photo depicts a {rng.choice(NAMES[:18])}"] for _ in range(n)]
    return images, candidates, references


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


class _TensorFeatures:
    """torchmetrics 1.9 expects ``get_*_features`` to return tensors; transformers 5
    returns output objects. This adapter hands it the same model's projected
    features, so both sides run the very same weights."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        return getattr(self.model, name)

    def to(self, *args, **kwargs):  # torchmetrics moves the model; keep the adapter
        self.model.to(*args, **kwargs)
        return self

    def get_image_features(self, *args, **kwargs):
        out = self.model.get_image_features(*args, **kwargs)
        return out if hasattr(out, "norm") else out.pooler_output

    def get_text_features(self, *args, **kwargs):
        out = self.model.get_text_features(*args, **kwargs)
        return out if hasattr(out, "norm") else out.pooler_output


def bench_scores(model, processor, n: int, batch: int, repeats: int) -> dict:
    import torch
    from torchmetrics.multimodal.clip_score import CLIPScore

    from lmms_scene.metrics import clip

    images, candidates, references = data(n)
    model_name = MODEL_NAME
    clip.use_loaded(model_name, model, processor.tokenizer, processor.image_processor, device="cpu")

    def ours_ref():
        out = []
        for s in range(0, n, batch):
            out += clip.ref_clip_score(
                images[s : s + batch], candidates[s : s + batch], references[s : s + batch], model=model_name
            )
        return out

    def ours_clip():
        for s in range(0, n, batch):
            clip.clip_score(images[s : s + batch], candidates[s : s + batch], model=model_name)

    def ours_per_row():
        for i in range(n):
            clip.ref_clip_score(images[i : i + 1], candidates[i : i + 1], references[i : i + 1], model=model_name)

    def ours_per_row_noise_grid():
        # cooco_noise: each item is scored once per noise setting (6), on the same
        # noise-free crop, which process_results names so it is encoded once
        for _setting in range(6):
            for i in range(n):
                clip.ref_clip_score(
                    images[i : i + 1],
                    candidates[i : i + 1],
                    references[i : i + 1],
                    model=model_name,
                    image_keys=[("bench-crop", i)],
                )

    cold = best_of(ours_ref, 1)  # first pass: every distinct text is embedded
    warm = best_of(ours_ref, repeats)
    clip_only = best_of(ours_clip, repeats)
    per_row = best_of(ours_per_row, 1)
    per_row_grid = best_of(ours_per_row_noise_grid, 1)

    metric = CLIPScore(model_name_or_path=lambda: (_TensorFeatures(model), processor))
    tensors = [torch.from_numpy(np.array(im)).permute(2, 0, 1) for im in images]

    def torchmetrics_run():
        metric.reset()
        for s in range(0, n, batch):
            metric.update(tensors[s : s + batch], candidates[s : s + batch])
        return metric.compute()

    tm = best_of(torchmetrics_run, repeats)

    # Same model, same data. Ours follows Hessel et al. Eq. 1: 2.5 * max(cos, 0) per pair.
    # torchmetrics' CLIPScore.compute() clamps the *mean* instead: max(100 * mean(cos), 0),
    # so with negative pairs its figure is lower; computed its way, ours must match it.
    ours_mean = float(np.mean(clip.clip_score(images, candidates, model=model_name))) / 2.5 * 100
    enc = clip.encoder(model_name)
    raw_cos = (enc.embed_images(images) * enc.embed_texts(candidates)).sum(-1)
    ours_torchmetrics_way = max(100 * float(raw_cos.mean()), 0.0)
    return {
        "n": n,
        "batch": batch,
        "ours_refclipscore_samples_per_s": n / warm,
        "ours_refclipscore_cold_cache_samples_per_s": n / cold,
        "ours_refclipscore_per_row_calls_samples_per_s": n / per_row,
        "ours_refclipscore_per_row_noise_grid_rows_per_s": 6 * n / per_row_grid,
        "ours_clip_score_samples_per_s": n / clip_only,
        "torchmetrics_clipscore_samples_per_s": n / tm,
        "speedup_refclipscore_vs_torchmetrics": tm / warm,
        "speedup_clip_score_vs_torchmetrics": tm / clip_only,
        "mean_clip_score_ours_rescaled_to_100": ours_mean,
        "mean_clip_score_torchmetrics": float(torchmetrics_run()),
        "ours_clamping_the_mean_like_torchmetrics": ours_torchmetrics_way,
        "share_of_pairs_with_negative_cosine": float((raw_cos < 0).float().mean()),
    }


def noise_grid_docs(n: int, seed: int = 0) -> list[dict]:
    """A ``cooco_noise``-shaped run: ``n`` items (random 640 x 480-ish scenes with a
    target box), each under the 6 noise settings, with answers that change with the
    setting (as a real model's do)."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        w, h = rng.randint(480, 640), rng.randint(360, 480)
        image = Image.fromarray(np_rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        bw, bh = rng.randint(40, w // 3), rng.randint(40, h // 3)
        box = [float(rng.randint(0, w - bw)), float(rng.randint(0, h - bh)), float(bw), float(bh)]
        gold, target = rng.choice(NAMES), rng.choice(NAMES[:18])
        for area in ("target", "context", "all"):
            for level in (0.5, 1.0):
                docs.append(
                    {
                        "image": image,
                        "image_id": f"bench_{i}",
                        "width": w,
                        "height": h,
                        "target_bbox": box,
                        "condition": "low",
                        "scene": "kitchen",
                        "target": target,
                        "gold_label": gold,
                        "noise_area": area,
                        "noise_level": level,
                        "answer": rng.choice([gold, target, rng.choice(NAMES), f"a small {gold}"]),
                    }
                )
    return docs


def bench_task_path(model, processor, n: int, batch: int) -> dict:
    """RefCLIPScore through the task's own path: the batch pre-scoring pass the harness
    hook runs after generation, ``process_results`` on every doc (from 4 threads, as
    lmms-eval calls it) and every metric key's aggregation; the same without the batch
    pass (row by row, the old path); and torchmetrics ``CLIPScore`` on the same (target
    crop, answer) pairs with the same model. The two task paths must agree to 1e-6."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    from torchmetrics.multimodal.clip_score import CLIPScore

    from lmms_scene import cache, settings
    from lmms_scene.data import cooco
    from lmms_scene.metrics import clip
    from lmms_scene.metrics.cooco import scoring
    from lmms_scene.tasks.cooco import utils

    docs = noise_grid_docs(n)

    def task_path(batched: bool) -> tuple[float, dict]:
        cache.clear()
        clip.use_loaded(MODEL_NAME, model, processor.tokenizer, processor.image_processor, device="cpu")
        start = time.perf_counter()
        if batched:  # what lmms_scene.harness's hook does after generation
            utils.prescore([(d, d["answer"]) for d in docs])
        with ThreadPoolExecutor(4) as pool:
            entries = list(pool.map(lambda d: utils.process_results(d, [d["answer"]]), docs))
        per_key: dict[str, list] = {}
        for e in entries:
            for k, v in e.items():
                per_key.setdefault(k, []).append(v)
        aggregated = {
            k: (utils.breakdown(v) if k == scoring.BREAKDOWN_KEY else utils.mean_score(v)) for k, v in per_key.items()
        }
        return time.perf_counter() - start, aggregated

    with settings.override(clip_model=MODEL_NAME):
        per_row, agg_row = task_path(batched=False)
        ours, aggregated = task_path(batched=True)
    assert abs(agg_row["refclipscore"] - aggregated["refclipscore"]) < 1e-6

    crops = [torch.from_numpy(np.array(cooco.target_crop(d))).permute(2, 0, 1) for d in docs]
    texts = [scoring.long_form(scoring.normalise_output(d["answer"])) for d in docs]
    metric = CLIPScore(model_name_or_path=lambda: (_TensorFeatures(model), processor))
    start = time.perf_counter()
    for s in range(0, len(docs), batch):
        metric.update(crops[s : s + batch], texts[s : s + batch])
    metric.compute()
    tm = time.perf_counter() - start
    return {
        "rows": len(docs),
        "task_path_rows_per_s": len(docs) / ours,
        "task_path_row_by_row_rows_per_s": len(docs) / per_row,
        "torchmetrics_clipscore_rows_per_s": len(docs) / tm,
        "speedup_task_path_vs_torchmetrics": tm / ours,
        "speedup_row_by_row_vs_torchmetrics": tm / per_row,
        "speedup_batched_vs_row_by_row": per_row / ours,
        "refclipscore": aggregated["refclipscore"],
    }


def numpy_noise(image, box, area, level, seed):
    """lmms-scene 0.1.0's noise (before the torch generator), kept here as the reference
    the speed-up is measured against in the same run: numpy's generator, float32 draws
    for the whole image, then ``np.where`` over the mask."""
    from lmms_scene import imaging

    mask = imaging.noise_mask(image.size, box, area)
    pixels = np.asarray(imaging.to_rgb(image), dtype=np.uint8)
    noise = np.random.default_rng(seed).standard_normal(pixels.shape, dtype=np.float32) * np.float32(255.0 * level)
    noisy = np.clip(pixels.astype(np.float32) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(np.where(mask[:, :, None], noisy, pixels))


def bench_imaging(repeats: int) -> dict:
    from lmms_scene import imaging

    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8))
    box = (200, 150, 160, 120)
    out = {}
    pad = best_of(lambda: imaging.pad_to_square(image, box), repeats)
    out["pad_ms"] = 1000 * pad
    padded, pbox = imaging.pad_to_square(image, box)
    for area in imaging.NOISE_AREAS:
        t = best_of(lambda area=area: imaging.add_gaussian_noise(padded, pbox, area, 0.5, seed=1), repeats)
        out[f"noise_{area}_ms"] = 1000 * t
        out[f"pad_plus_noise_{area}_ms"] = 1000 * (t + pad)
        old = best_of(lambda area=area: numpy_noise(padded, pbox, area, 0.5, 1), repeats)
        out[f"noise_{area}_previous_numpy_ms"] = 1000 * old
        out[f"noise_{area}_speedup"] = old / t
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model, processor = build_clip(Path(tmp))
    report = {
        "threads": args.threads,
        "clip": "random CLIPConfig() (ViT-B/32 size)",
        **bench_scores(model, processor, args.n, args.batch, args.repeats),
    }
    report["task_path_noise_grid"] = bench_task_path(model, processor, args.n, args.batch)
    report["imaging_640x480"] = bench_imaging(args.repeats * 3)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
