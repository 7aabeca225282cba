"""Benchmark of Pfram's image-to-image similarity (Pfram paper, Algorithm 1).

Compares :func:`lmms_scene.analysis.pfram.image_similarity` (one product per block
pair; each product serves both directions) with the reference code's batching
pattern (yellow-binary-tree/Pfram ``visual_embed.py``: a chunk of anchors against
one reference image at a time), re-implemented here for the comparison, on the
same data in the same run. Prints one JSON object:

- ``speedup``: reference time / ours (best of ``--repeats`` interleaved runs each;
  the per-repeat ratios too), ``max_abs_diff``;
- ``fraction_of_bare_matmul``: the full similarity's FLOP (2 n^2 N^2 d) per second
  of ours, divided by the machine's bare fp32 matrix-product rate on the same threads
  (best of a block-sized and two larger products; above 1 is possible: ours skips
  half the products), and ``executed_fraction_of_bare_matmul`` for the products ours runs;
- ``peak_rss_delta_mb``: peak resident memory added by each method, measured in a
  fresh subprocess, beside the bound ``block_bytes`` sets;
- ``paper_scale``: FLOP count at n = 1600, N = 576, d = 4096 and the time it
  would take at a GPU's peak rate (assumed rates listed; not measured).

Usage: python bench/bench_pfram.py [--n 400 --patches 64 --dim 256 --threads 2]
Timing figures are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time

import torch


def reference_batching(feats: torch.Tensor, num_chunks: int = 8) -> torch.Tensor:
    """The reference code's pattern: anchors in chunks, one reference image per product."""
    unit = feats / feats.norm(dim=-1, keepdim=True)
    n = unit.shape[0]
    sims = torch.empty(n, n)
    chunk = math.ceil(n / num_chunks)
    with torch.no_grad():
        for j in range(0, n, chunk):
            anchors = unit[j : j + chunk]  # [c, N, d]
            for i in range(n):
                prod = torch.matmul(anchors, unit[i].T.unsqueeze(0))  # [c, N, N]
                sims[j : j + chunk, i] = prod.max(dim=-1).values.mean(dim=-1)
    return sims


def make_data(n: int, patches: int, dim: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, patches, dim, generator=g)


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bare_matmul_rate(rows: int, dim: int, repeats: int) -> float:
    """The machine's fp32 matmul limit at this ``dim``: the best rate over a block's own
    row count and larger square-ish products (a small block alone is call-overhead bound,
    which would understate the limit)."""
    best = 0.0
    for r in sorted({rows, 1024, 2048}):
        a = torch.randn(r, dim)
        b = torch.randn(r, dim)
        t, _ = best_time(lambda: a @ b.T, repeats)  # noqa: B023 (timed inside this iteration)
        best = max(best, 2.0 * r * r * dim / t)
    return best


def _child(method: str, n: int, patches: int, dim: int, threads: int, block_bytes: int) -> None:
    torch.set_num_threads(threads)
    feats = make_data(n, patches, dim)
    from lmms_scene.analysis.pfram import image_similarity

    # warm the allocator and thread pool on a tiny input, then reset the kernel's peak-RSS mark
    image_similarity(feats[:4], block_bytes=block_bytes)
    reference_batching(feats[:4])
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status_kb("VmRSS")
    if method == "ours":
        image_similarity(feats, block_bytes=block_bytes)
    else:
        reference_batching(feats)
    print(json.dumps({"peak_rss_delta_mb": (_status_kb("VmHWM") - base) / 1024}))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_memory(method: str, args: argparse.Namespace, block_bytes: int) -> float:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        method,
        "--n",
        str(args.n),
        "--patches",
        str(args.patches),
        "--dim",
        str(args.dim),
        "--threads",
        str(args.threads),
        "--block-bytes",
        str(block_bytes),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_rss_delta_mb"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--patches", type=int, default=64)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--block-bytes", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    from lmms_scene.analysis.pfram import DEFAULT_BLOCK_BYTES, _block_size, image_similarity

    block_bytes = args.block_bytes or DEFAULT_BLOCK_BYTES
    if args.child:
        _child(args.child, args.n, args.patches, args.dim, args.threads, block_bytes)
        return
    torch.set_num_threads(args.threads)
    n, N, d = args.n, args.patches, args.dim
    feats = make_data(n, N, d)
    dev = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)

    def ours():
        out = image_similarity(feats.to(dev), block_bytes=block_bytes, device=dev)
        sync()
        return out

    def ref():
        out = reference_batching(feats.to(dev))
        sync()
        return out

    ours(), ref()  # warm-up
    # interleaved, best of each: other load on the machine hits both methods alike
    t_ours = t_ref = math.inf
    ratios = []
    for _ in range(args.repeats):
        a, s_ours = best_time(ours, 1)
        r, s_ref = best_time(ref, 1)
        t_ours, t_ref = min(t_ours, a), min(t_ref, r)
        ratios.append(r / a)
    b = _block_size(N, d, block_bytes, dev.type)
    full_flop = 2.0 * n * n * N * N * d
    blocks = [min(b, n - s) for s in range(0, n, b)]
    done_flop = sum(2.0 * bi * bj * N * N * d for i, bi in enumerate(blocks) for bj in blocks[i:])
    rate = bare_matmul_rate(min(b, n) * N, d, args.repeats) if dev.type == "cpu" else float("nan")

    paper = {"n": 1600, "N": 576, "d": 4096}
    paper_full = 2.0 * 1600**2 * 576**2 * 4096
    pb = _block_size(576, 4096, 8 * 2**30, "cuda")
    pblocks = [min(pb, 1600 - s) for s in range(0, 1600, pb)]
    paper_done = sum(2.0 * bi * bj * 576**2 * 4096 for i, bi in enumerate(pblocks) for bj in pblocks[i:])
    gpu_peaks = {
        "H100/H200 SXM fp32 (no tensor cores), 67 TFLOP/s": 67e12,
        "TF32 tensor cores dense, 495 TFLOP/s": 495e12,
    }
    report = {
        "setting": {
            "n": n,
            "N": N,
            "d": d,
            "threads": args.threads,
            "device": str(dev),
            "torch": torch.__version__,
            "block_bytes": block_bytes,
            "images_per_block": b,
        },
        "seconds_ours": t_ours,
        "seconds_reference_batching": t_ref,
        "speedup": t_ref / t_ours,
        "speedup_per_repeat": ratios,
        "max_abs_diff": float((s_ours.cpu() - s_ref.cpu()).abs().max()),
        "flop_full_similarity": full_flop,
        "flop_executed_ours": done_flop,
        "bare_matmul_gflops": rate / 1e9,
        "ours_effective_gflops": full_flop / t_ours / 1e9,
        "ours_executed_gflops": done_flop / t_ours / 1e9,
        "fraction_of_bare_matmul": (full_flop / t_ours) / rate,
        "executed_fraction_of_bare_matmul": (done_flop / t_ours) / rate,
        "paper_scale": {
            **paper,
            "flop_full": paper_full,
            "flop_ours_with_8GiB_blocks": paper_done,
            "images_per_block_8GiB": pb,
            "seconds_at_peak": {k: paper_done / v for k, v in gpu_peaks.items()},
        },
    }
    if dev.type == "cpu":
        report["peak_rss_delta_mb"] = {
            "ours": peak_memory("ours", args, block_bytes),
            "ours_with_block_bytes_1MiB": peak_memory("ours", args, 2**20),
            "reference_batching": peak_memory("reference", args, block_bytes),
            "output_matrix_mb": n * n * 4 / 2**20,
            "bound_block_bytes_mb": block_bytes / 2**20,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
