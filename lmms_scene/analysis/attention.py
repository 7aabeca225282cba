"""COOCO attention allocation: how much a VLM looks at the target versus its context.

Follows Appendix C of the COOCO paper (Merlo et al., 2025) for LLaVA-style
models, whose LLM image tokens map one-to-one onto the vision tower's patches
(LLaVA-1.5; LLaVA-OneVision's base-image tokens):

- C.1 :func:`llm_image_weights`: LLM attention averaged over heads, the first
  (BOS / sink) column zeroed, rows renormalised, averaged over layers; the rows
  of the generated tokens (final end token excluded), restricted to the image
  tokens and renormalised (C.3, A-hat).
- C.2 :func:`vit_normalised` / :func:`vit_baseline` / :func:`vit_token_maps`: ViT
  attention per layer averaged over heads, rows normalised, the dataset-average
  map subtracted, ReLU; each vision token's column reshaped into a g x g map V_j.
- C.3 :func:`image_attention_map`: A_img = mean over output tokens of
  sum_j A-hat_ij V_j.
- C.4 / C.5 :func:`allocation_ratio`: attention inside the target box over
  attention in the context (outside the box, padding excluded), per ViT layer.

:func:`collect_attention` runs a LLaVA-style HF checkpoint (eager attention) and
returns the per-instance pieces; :func:`allocation_ratios` turns a dataset of
them into r_l per instance and layer (the baseline needs the whole dataset).

Generated tokens' attention rows are read from one teacher-forced forward pass
over prompt + generated tokens: with causal attention those rows equal the ones
seen during generation. As in Appendix C.1, the row of output token o_i is the
row at o_i's own position in that full sequence: with a prompt of P tokens and
T kept output tokens the query rows are positions P, P + 1, ..., P + T - 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lmms_scene.cache import cached, load_pretrained
from lmms_scene.imaging import pad_offsets

__all__ = [
    "AttentionRecord",
    "allocation_ratio",
    "allocation_ratios",
    "box_masks",
    "collect_attention",
    "image_attention_map",
    "llm_image_weights",
    "vit_baseline",
    "vit_normalised",
    "vit_token_maps",
]


def _layers(attentions: Sequence[torch.Tensor] | torch.Tensor, name: str) -> list[torch.Tensor]:
    """The per-layer ``[H, N, N]`` tensors (views, on their own device and dtype)."""
    if isinstance(attentions, torch.Tensor):
        a = attentions
        if a.ndim == 5 and a.shape[1] == 1:
            a = a[:, 0]
        if a.ndim != 4:
            raise ValueError(f"{name}: expected [layers, heads, N, N], got {tuple(a.shape)}")
        layers = list(a.unbind(0))
    else:
        layers = [t[0] if t.ndim == 4 and t.shape[0] == 1 else t for t in attentions]
    if len(layers) == 0:
        raise ValueError(f"{name}: no layers")
    shapes = {tuple(t.shape) for t in layers}
    if len(shapes) != 1:
        raise ValueError(f"{name}: layers differ in shape {sorted(shapes)}")
    shape = shapes.pop()
    if len(shape) != 3 or shape[-1] != shape[-2]:
        raise ValueError(f"{name}: expected [layers, heads, N, N], got {(len(layers), *shape)}")
    return layers


def _head_mean(layers: list[torch.Tensor], name: str, rows: torch.Tensor | None = None) -> torch.Tensor:
    """``[L, R, N]`` float64 on the CPU: per layer, the kept rows averaged over heads.

    The row selection and the head mean run layer by layer on the attention's own
    device (in float64, so the result does not depend on where it ran); only the
    ``[R, N]`` result of each layer is moved to the CPU.
    """
    out = []
    for t in layers:
        x = t.detach()
        if rows is not None:
            x = x[:, rows.to(x.device), :]
        m = x.double().mean(dim=0)
        if not torch.isfinite(m).all():
            raise ValueError(f"{name}: NaN or inf attention")
        out.append(m.cpu())
    return torch.stack(out)


def _renormalise_rows(a: torch.Tensor, name: str) -> torch.Tensor:
    s = a.sum(dim=-1, keepdim=True)
    if (s <= 0).any():
        raise ValueError(f"{name}: a row has no attention mass left to normalise")
    return a / s


def llm_image_weights(
    attentions: Sequence[torch.Tensor] | torch.Tensor,
    image_positions: Sequence[int] | torch.Tensor,
    query_positions: Sequence[int] | torch.Tensor,
    *,
    sink_index: int = 0,
) -> torch.Tensor:
    """A-hat: attention of each output token over the image tokens (COOCO App. C.1, C.3).

    Args:
        attentions: the LLM's attentions for one sequence, per layer ``[H, N, N]``
            (or ``[1, H, N, N]``), on any device and in any dtype; the head mean is
            taken layer by layer there, on the kept rows only.
        image_positions: sequence positions of the image tokens, in patch order.
        query_positions: the rows to keep, one per output token: output token o_i's
            own position in the full (prompt + outputs) sequence (App. C.1).
        sink_index: the column zeroed before renormalising (the BOS token).

    Returns:
        ``[len(query_positions), len(image_positions)]``, rows summing to 1.
    """
    layers = _layers(attentions, "attentions")
    n = layers[0].shape[-1]
    rows = torch.as_tensor(query_positions, dtype=torch.long).flatten().cpu()
    cols = torch.as_tensor(image_positions, dtype=torch.long).flatten().cpu()
    if rows.numel() == 0 or cols.numel() == 0:
        raise ValueError("llm_image_weights: no output tokens or no image tokens")
    for what, idx in (("query_positions", rows), ("image_positions", cols)):
        if (idx < 0).any() or (idx >= n).any():
            raise ValueError(f"{what}: positions must lie in [0, {n - 1}] (the sequence has {n} tokens)")
    if (rows == sink_index).any():
        raise ValueError("query_positions: the sink token's own row has nothing left after zeroing it")
    # head mean per layer on the model's device, keeping only the query rows: [L, T, N]
    sel = _head_mean(layers, "attentions", rows)
    sel[:, :, sink_index] = 0.0
    a_llm = _renormalise_rows(sel, "attentions").mean(dim=0)  # A_LLM rows, [T, N]
    img = a_llm[:, cols]
    return _renormalise_rows(img, "image attention")


def vit_normalised(attentions: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """A_norm per layer: ViT attention averaged over heads, rows normalised (COOCO App. C.2).

    Returns ``[L, S, S]`` (float64).
    """
    a = _head_mean(_layers(attentions, "vit attentions"), "vit attentions")
    return _renormalise_rows(a, "vit attentions")


def vit_baseline(normalised: Sequence[torch.Tensor]) -> torch.Tensor:
    """A_avg per layer: the dataset average of :func:`vit_normalised` maps (same image size only)."""
    if len(normalised) == 0:
        raise ValueError("vit_baseline: no instances")
    shapes = {tuple(t.shape) for t in normalised}
    if len(shapes) != 1:
        raise ValueError(f"vit_baseline: instances differ in shape {sorted(shapes)}; use one input resolution")
    return torch.stack([t.double() for t in normalised]).mean(dim=0)


def vit_token_maps(
    normalised: torch.Tensor, baseline: torch.Tensor, *, n_prefix: int = 0, use: str = "column"
) -> torch.Tensor:
    """V_j per layer: ReLU(A_norm - A_avg), vision token j's column as a g x g map (COOCO App. C.2).

    Args:
        normalised, baseline: ``[L, S, S]``.
        n_prefix: leading non-patch tokens (1 for a CLS token) dropped from rows and columns.
        use: ``"column"`` (the paper: attention token j receives) or ``"row"``
            (attention token j pays).

    Returns:
        ``[L, J, g, g]`` with J = g * g patch tokens.
    """
    if normalised.shape != baseline.shape:
        raise ValueError(f"baseline: shape {tuple(baseline.shape)} differs from {tuple(normalised.shape)}")
    adj = torch.relu(normalised.double() - baseline.double())[:, n_prefix:, n_prefix:]
    j = adj.shape[-1]
    g = math.isqrt(j)
    if g * g != j:
        raise ValueError(f"vit_token_maps: {j} patch tokens do not form a square grid (n_prefix={n_prefix}?)")
    if use == "column":
        maps = adj.transpose(1, 2)  # [L, j, queries]
    elif use == "row":
        maps = adj
    else:
        raise ValueError(f"use: expected 'column' or 'row', got {use!r}")
    return maps.reshape(adj.shape[0], j, g, g)


def image_attention_map(weights: torch.Tensor, token_maps: torch.Tensor) -> torch.Tensor:
    """A_final: mean over output tokens of sum_j A-hat_ij V_j (COOCO App. C.3).

    ``weights`` ``[T, J]``; ``token_maps`` ``[J, g, g]`` or ``[L, J, g, g]``; returns ``[g, g]`` or ``[L, g, g]``.
    """
    w = weights.double()
    if w.shape[-1] != token_maps.shape[-3]:
        raise ValueError(f"weights cover {w.shape[-1]} image tokens, token_maps {token_maps.shape[-3]}")
    per_token = torch.einsum("tj,...jxy->...txy", w, token_maps.double())
    return per_token.mean(dim=-3)


def box_masks(
    box: Sequence[float],
    image_size: tuple[int, int],
    *,
    canvas: str = "stretch",
    resolution: int = 336,
) -> tuple[np.ndarray, np.ndarray]:
    """Target and valid-region masks on the model's square input canvas.

    Args:
        box: COCO ``(x_min, y_min, w, h)`` in pixels of the original image.
        image_size: original ``(width, height)``.
        canvas: how the image reached the square canvas: ``"stretch"`` (resized to
            the square), ``"crop"`` (shorter side fitted, centre crop: CLIP's
            processor; the cut-off parts are simply not on the canvas) or ``"pad"``
            (longer side fitted, padded to a centred square; the padding is
            excluded from the context).
        resolution: side of the mask grid (the map is upsampled to it, nearest).

    Returns:
        ``(target, valid)`` boolean ``[resolution, resolution]`` arrays.
    """
    w_img, h_img = image_size
    x, y, w, h = (float(v) for v in box)
    if w_img <= 0 or h_img <= 0 or w <= 0 or h <= 0:
        raise ValueError(f"box_masks: empty image {image_size} or box {tuple(box)}")
    if canvas == "stretch":
        sx, sy, ox, oy = resolution / w_img, resolution / h_img, 0.0, 0.0
    elif canvas == "crop":
        s = resolution / min(w_img, h_img)
        sx = sy = s
        ox, oy = (resolution - w_img * s) / 2, (resolution - h_img * s) / 2
    elif canvas == "pad":
        # padded to a square in image pixels (imaging.pad_offsets), then resized
        side, dx, dy = pad_offsets(w_img, h_img)
        sx = sy = s = resolution / side
        ox, oy = dx * s, dy * s
    else:
        raise ValueError(f"canvas: expected 'stretch', 'crop' or 'pad', got {canvas!r}")
    # pixel centres of the canvas grid
    c = np.arange(resolution) + 0.5
    xs, ys = c[None, :], c[:, None]
    valid = (xs >= ox) & (xs < ox + w_img * sx) & (ys >= oy) & (ys < oy + h_img * sy)
    target = (xs >= ox + x * sx) & (xs < ox + (x + w) * sx) & (ys >= oy + y * sy) & (ys < oy + (y + h) * sy)
    target &= valid
    if not target.any():
        raise ValueError(f"box_masks: box {tuple(box)} covers no canvas pixel")
    return target, valid


def allocation_ratio(image_map: torch.Tensor | np.ndarray, target: np.ndarray, valid: np.ndarray) -> float:
    """r = a_target / a_context (COOCO App. C.4-C.5) for one ``[g, g]`` map.

    The map is upsampled to the masks' resolution by nearest neighbour. Returns
    ``inf`` when all attention falls inside the box; raises when the map is zero
    on the whole valid region (the ratio would be 0/0).
    """
    m = torch.as_tensor(np.asarray(image_map), dtype=torch.float64)
    if m.ndim != 2:
        raise ValueError(f"image_map: expected [g, g], got {tuple(m.shape)}")
    if not torch.isfinite(m).all() or (m < 0).any():
        raise ValueError("image_map: expected finite non-negative attention")
    up = torch.nn.functional.interpolate(m[None, None], size=target.shape, mode="nearest")[0, 0].numpy()
    a_target = float(up[target].sum())
    a_context = float(up[valid & ~target].sum())
    if a_context == 0.0:
        if a_target == 0.0:
            raise ValueError("allocation_ratio: no attention on the image (0/0)")
        return math.inf
    return a_target / a_context


@dataclass
class AttentionRecord:
    """One instance's attention, as :func:`collect_attention` returns it."""

    llm_weights: torch.Tensor  # A-hat [T, J]
    vit_normalised: torch.Tensor  # A_norm [L, S, S]
    n_prefix: int  # non-patch tokens at the start of the ViT sequence (CLS)
    output_ids: list[int] = field(default_factory=list)


def allocation_ratios(
    records: Sequence[AttentionRecord],
    boxes: Sequence[Sequence[float]],
    image_sizes: Sequence[tuple[int, int]],
    *,
    canvas: str = "stretch",
    resolution: int = 336,
    use: str = "column",
) -> np.ndarray:
    """r_l^(t) for every instance t and ViT layer l, ``[T, L]`` (COOCO App. C.5).

    The baseline A_avg is the mean over ``records``, so pass the whole dataset
    (of one input resolution) at once. The paper's r-bar_l is the column mean.
    """
    if not (len(records) == len(boxes) == len(image_sizes)):
        raise ValueError("records, boxes and image_sizes must have the same length")
    base = vit_baseline([r.vit_normalised for r in records])
    out = np.empty((len(records), base.shape[0]))
    for t, (rec, box, size) in enumerate(zip(records, boxes, image_sizes)):
        maps = vit_token_maps(rec.vit_normalised, base, n_prefix=rec.n_prefix, use=use)
        per_layer = image_attention_map(rec.llm_weights, maps)
        target, valid = box_masks(box, size, canvas=canvas, resolution=resolution)
        for layer in range(per_layer.shape[0]):
            out[t, layer] = allocation_ratio(per_layer[layer], target, valid)
    return out


def collect_attention(
    model: str,
    images: Sequence[Any],
    prompt: str,
    *,
    max_new_tokens: int = 8,
    device: str = "cpu",
    dtype: str | torch.dtype = "auto",
    output_ids: Sequence[Sequence[int]] | None = None,
) -> list[AttentionRecord]:
    """Attention pieces for each image from a LLaVA-style checkpoint (eager attention).

    Args:
        model: checkpoint of a ``llava`` or ``llava_onevision`` model.
        images: PIL images (one instance each).
        prompt: the user text; it goes through the chat template after the image.
        max_new_tokens: greedy generation length.
        device / dtype: where and in which precision the model runs (``dtype`` goes
            to ``from_pretrained``; ``"auto"`` keeps the checkpoint's dtype, e.g.
            float16 / bfloat16 for released LLaVA weights). The attention maps are
            reduced to float64 after the head mean.
        output_ids: skip generation and use these output token ids (for tests and
            for reusing the outputs of an lmms-eval run).
    """
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        AutoProcessor,
    )  # deferred: transformers (imports torch) is heavy to import

    cfg = AutoConfig.from_pretrained(model)
    if cfg.model_type not in ("llava", "llava_onevision"):
        raise ValueError(f"collect_attention: {cfg.model_type!r} is not a LLaVA-style model (llava, llava_onevision)")

    def load() -> tuple[Any, Any]:
        m = load_pretrained(AutoModelForImageTextToText, model, device, dtype=dtype, attn_implementation="eager")
        return m, AutoProcessor.from_pretrained(model)

    vlm, processor = cached(("cooco-attention", model, device, str(dtype)), load)
    image_token_id = int(vlm.config.image_token_id)
    eos = (
        {int(vlm.generation_config.eos_token_id)}
        if isinstance(vlm.generation_config.eos_token_id, int)
        else set(vlm.generation_config.eos_token_id or [])
    )
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    records = []
    for n, image in enumerate(images):
        enc = processor(text=[text], images=[image], return_tensors="pt").to(device)
        enc["pixel_values"] = enc["pixel_values"].to(vlm.dtype)
        prompt_len = enc["input_ids"].shape[1]
        with torch.no_grad():
            if output_ids is None:
                gen = vlm.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
                new = gen[0, prompt_len:].tolist()
            else:
                new = list(output_ids[n])
            while new and new[-1] in eos:  # the final end token is not informative (App. C.3)
                new = new[:-1]
            if not new:
                raise ValueError(f"image {n}: the model generated no content token")
            full = torch.cat([enc["input_ids"], torch.tensor([new], device=enc["input_ids"].device)], dim=1)
            mask = torch.ones_like(full)
            extra = {k: v for k, v in enc.items() if k not in ("input_ids", "attention_mask")}
            out = vlm(input_ids=full, attention_mask=mask, output_attentions=True, use_cache=False, **extra)
            pix = enc["pixel_values"]
            if pix.ndim == 5:
                pix = pix[:, 0]  # LLaVA-OneVision: the base image (App. C omits multi-crop tokens)
            vo = vlm.model.vision_tower(pix, output_attentions=True)
        positions = (full[0] == image_token_id).nonzero().flatten()
        n_grid = (pix.shape[-2] // vlm.config.vision_config.patch_size) * (
            pix.shape[-1] // vlm.config.vision_config.patch_size
        )
        positions = positions[:n_grid]  # base-image tokens come first
        # App. C.1: output token o_i's row is at its own position in the full sequence
        # (prompt + outputs), i.e. positions prompt_len .. prompt_len + len(new) - 1
        queries = torch.arange(prompt_len, prompt_len + len(new))
        if out.attentions[0].shape[-1] != prompt_len + len(new):
            raise RuntimeError(
                f"image {n}: the forward pass covers {out.attentions[0].shape[-1]} positions,"
                f" expected prompt ({prompt_len}) + outputs ({len(new)})"
            )
        weights = llm_image_weights(out.attentions, positions, queries)
        vit = vit_normalised(vo.attentions)
        records.append(AttentionRecord(weights, vit, n_prefix=vit.shape[-1] - n_grid, output_ids=new))
    return records
