"""Benchmark of Layered-VQA's delivery machinery and layer compositing on the CPU.

1. Delivery: turns per second of :func:`lmms_scene.data.layered_vqa.delivery.deliver` over all
   16 schedules on a generated 6-layer item (text and views only, as the harness builds
   each round's prompt), and with every turn's images rendered (what ``doc_to_visual``
   and each round pay), and of one whole harness round (``simple_round``: transcript +
   cumulative images) at the item's size.
2. Compositing: alpha compositing of a 6-layer 1024x1024 scene (background + 5 RGBA
   objects with soft, semi-transparent edges) with :func:`lmms_scene.compositing.composite_image`,
   side by side with (interleaved rounds) a per-layer PIL ``Image.alpha_composite`` chain
   on the same layers, their ratio, the largest pixel difference between the two, and the
   recomposition check against the chain's result (identical: its fast path) and against
   a near miss (one level off on a tenth of the rows: the path that counts pixels).

Usage: python bench/bench_layered_vqa.py [--size 1024 --repeats 20]
Prints one JSON object. Timing figures are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _timeit(fn, repeats: int) -> float:
    fn()  # warm
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def soft_layers(size: int, n: int = 6, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    layers = [
        np.concatenate(
            [rng.integers(0, 256, (size, size, 3), dtype=np.uint8), np.full((size, size, 1), 255, np.uint8)], 2
        )
    ]
    for _ in range(n - 1):
        cx, cy, r = rng.uniform(0.2, 0.8) * size, rng.uniform(0.2, 0.8) * size, rng.uniform(0.1, 0.3) * size
        d = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
        alpha = np.clip((r - d) / (0.05 * size), 0, 1)  # soft edge: semi-transparent ring
        arr = np.zeros((size, size, 4), np.uint8)
        arr[..., :3] = rng.integers(0, 256, 3, dtype=np.uint8)
        arr[..., 3] = (alpha * 255).astype(np.uint8)
        layers.append(arr)
    return layers


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()

    from PIL import Image

    from lmms_scene import compositing
    from lmms_scene.data.layered_vqa import synth as S
    from lmms_scene.data.layered_vqa.delivery import SCHEDULES, deliver
    from lmms_scene.data.layered_vqa.rounds import simple_round, turns_of

    out: dict = {}
    items = S.generate(1, seed=0, size=(320, 240))
    item = next(i for i in items if len(i["layers"]) == 6)
    schedules = list(SCHEDULES)
    n_turns = sum(len(deliver(item, s)) for s in schedules)

    t = _timeit(lambda: [deliver(item, s, check=False) for s in schedules], args.repeats * 10)
    out["delivery_turns_per_s_text_only"] = round(n_turns / t)
    t_checked = _timeit(lambda: [deliver(item, s) for s in schedules], args.repeats * 10)
    out["delivery_turns_per_s_with_validation"] = round(n_turns / t_checked)
    t_img = _timeit(lambda: [[t.images for t in deliver(item, s, check=False)] for s in schedules], args.repeats)
    out["delivery_turns_per_s_with_images_320x240"] = round(n_turns / t_img)

    doc = dict(item, schedule="recap-v", seed=0)
    turns = turns_of(doc)
    prev = [f"reply {k}" for k in range(len(turns))]
    t_round = _timeit(lambda: [simple_round(doc, prev[:k], round_idx=k) for k in range(1, len(turns))], args.repeats)
    out["harness_rounds_per_s_recap_v_320x240"] = round((len(turns) - 1) / t_round)
    out["turns_per_item_all_schedules"] = n_turns

    layers = soft_layers(args.size)
    pil_layers = [Image.fromarray(a, "RGBA") for a in layers]

    def pil_chain():
        img = pil_layers[0]
        for layer in pil_layers[1:]:
            img = Image.alpha_composite(img, layer)
        return img.convert("RGB")

    reference = pil_chain()
    # the check's other path: a reference that differs (one level on a tenth of the pixels)
    near = np.asarray(reference).copy()
    near[::10, :, 0] = np.where(near[::10, :, 0] < 255, near[::10, :, 0] + 1, 254)
    near = Image.fromarray(near, "RGB")
    # side by side, interleaved so that both see the same machine load
    t_ours = t_pil = t_check = 0.0
    rounds = 5
    for _ in range(rounds):
        t_ours += _timeit(lambda: compositing.composite_image(pil_layers), args.repeats)
        t_pil += _timeit(pil_chain, args.repeats)
        t_check += _timeit(lambda: compositing.recomposition_error(pil_layers, reference), args.repeats)
    t_ours, t_pil, t_check = t_ours / rounds, t_pil / rounds, t_check / rounds
    t_check_near = _timeit(lambda: compositing.recomposition_error(pil_layers, near), args.repeats)
    t_arrays = _timeit(lambda: compositing.composite(layers), args.repeats)
    ours = compositing.composite(layers)
    check = compositing.recomposition_error(layers, reference)
    out.update(
        composite_ms_6_layers=round(t_ours * 1e3, 2),
        composites_per_s=round(1 / t_ours, 1),
        composite_ms_from_numpy_arrays=round(t_arrays * 1e3, 2),
        pil_alpha_composite_chain_ms=round(t_pil * 1e3, 2),
        composite_over_pil_chain=round(t_ours / t_pil, 3),
        recomposition_check_ms=round(t_check * 1e3, 2),
        check_over_composite=round(t_check / t_ours, 3),
        check_over_pil_chain=round(t_check / t_pil, 3),
        recomposition_check_ms_near_miss=round(t_check_near * 1e3, 2),
        max_pixel_difference_vs_pil=int(np.abs(ours.astype(int) - np.asarray(reference).astype(int)).max()),
        check_max_difference=check.max_difference,
        size=f"{args.size}x{args.size}",
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
