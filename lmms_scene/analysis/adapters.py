"""Model adapters for Pfram's feature extraction: each loads an HF checkpoint and turns a
batch of PIL images into ``{layer: [per-image [N_i, d]]}``; :func:`parse_layers` resolves a
layer selection.


Hidden states come from ``output_hidden_states=True`` (no hooks). Layers are
named ``<tower>.<index>``:

- ``vision.i``: the vision tower's hidden state i (0 = patch embeddings, i = after
  block i), patch tokens only (a CLS token and register tokens are dropped: the
  last ``(H/p) * (W/p)`` tokens are kept; Qwen2/2.5-VL keeps all its unmerged
  patches, in the tower's own order, which Algorithm 1 does not depend on).
- ``llm.i``: the language model's hidden state i at the image-token positions;
  ``llm.0`` is the LLM input embeddings there, i.e. the projector output
  (Pfram paper, Sec. 4.1: "layer 0").

Supported: plain vision encoders (CLIP, SigLIP, DINOv2 and other ``AutoModel``
image encoders with a patch grid), LLaVA-1.5 style (``llava``), LLaVA-NeXT /
LLaVA-OneVision (``llava_next``, ``llava_onevision``; vision layers use the base
image, LLM layers every image token) and Qwen2-VL / Qwen2.5-VL. By default the
model sees the image alone (no instruction), as in the paper; ``instruction``
puts one user turn (the text, then the image) through the chat template. The
instruction comes BEFORE the image, as in the Pfram paper (Sec. 5) and its
reference code: with a causal LLM only earlier tokens can change the hidden
states at the image positions, so an instruction after the image could not
affect ``llm.i`` at all. ``llm.0`` (the projector output) never depends on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lmms_scene.cache import cached, load_pretrained

PLAIN_VISION = (
    "clip",
    "siglip",
    "siglip2",
    "dinov2",
    "dinov2_with_registers",
    "vit",
    "clip_vision_model",
    "siglip_vision_model",
)
LLAVA = ("llava", "llava_next", "llava_onevision")
QWEN = ("qwen2_vl", "qwen2_5_vl")


_LAYER = re.compile(r"^(vision|llm)\.(-?\d+|all|every(\d+))$")


def parse_layers(spec: str | Sequence[str], n_vision: int | None, n_llm: int | None) -> list[str]:
    """Resolve a layer selection into names ``vision.i`` / ``llm.i``.

    ``spec``: comma-separated items ``vision.3``, ``llm.-1`` (from the end),
    ``llm.all`` or ``llm.every4`` (0, 4, 8, ... and the last layer; the paper's choice).
    ``n_vision`` / ``n_llm``: number of blocks (hidden states are 0..n); None when
    the model has no such tower.
    """
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items:
        raise ValueError("layers: empty selection")
    out: list[str] = []
    for item in items:
        m = _LAYER.match(item)
        if not m:
            raise ValueError(f"layers: cannot read {item!r} (expected vision.3, llm.-1, llm.all or llm.every4)")
        tower, sel, step = m.group(1), m.group(2), m.group(3)
        n = n_vision if tower == "vision" else n_llm
        if n is None:
            raise ValueError(f"layers: {item!r} asks for the {tower} tower, which this model does not have")
        if sel == "all":
            idx = list(range(n + 1))
        elif step is not None:
            k = int(step)
            if k < 1:
                raise ValueError(f"layers: {item!r}: step must be >= 1")
            idx = sorted(set(range(0, n + 1, k)) | {n})
        else:
            i = int(sel)
            i = i + n + 1 if i < 0 else i
            if not 0 <= i <= n:
                raise ValueError(f"layers: {item!r} out of range (hidden states 0..{n})")
            idx = [i]
        for i in idx:
            name = f"{tower}.{i}"
            if name not in out:
                out.append(name)
    return out


# ---------------------------------------------------------------------------
# model adapters: each turns a batch of PIL images into {layer: [per-image [N_i, d]]}
# ---------------------------------------------------------------------------


@dataclass
class _Adapter:
    architecture: str
    n_vision: int | None
    n_llm: int | None
    run: Callable[[list[Any], list[str]], dict[str, list[torch.Tensor]]]


def _grid_tokens(hidden: torch.Tensor, pixel_values: torch.Tensor, patch: int) -> torch.Tensor:
    n_grid = (pixel_values.shape[-2] // patch) * (pixel_values.shape[-1] // patch)
    return hidden[:, -n_grid:]


def _vision_layers(layers: list[str]) -> list[int]:
    return [int(x.split(".")[1]) for x in layers if x.startswith("vision.")]


def _llm_layers(layers: list[str]) -> list[int]:
    return [int(x.split(".")[1]) for x in layers if x.startswith("llm.")]


def _input_device(model: Any) -> torch.device:
    return next(model.parameters()).device


def _load_model(cls: Any, path: str, device: str, dtype: torch.dtype, device_map: Any) -> Any:
    if device_map is None:
        return load_pretrained(cls, path, device, dtype=dtype)
    return load_pretrained(cls, path, None, dtype=dtype, device_map=device_map)


def _plain_adapter(
    path: str, model_type: str, device: str, dtype: torch.dtype, device_map: Any, processor_kwargs: dict[str, Any]
) -> _Adapter:
    from transformers import AutoImageProcessor, AutoModel  # deferred: transformers (imports torch) is heavy to import

    model = _load_model(AutoModel, path, device, dtype, device_map)
    encoder = getattr(model, "vision_model", model)
    cfg = getattr(encoder, "config", model.config)
    cfg = getattr(cfg, "vision_config", cfg)
    processor = AutoImageProcessor.from_pretrained(path, **processor_kwargs)
    patch = int(cfg.patch_size)

    def run(images: list[Any], layers: list[str]) -> dict[str, list[torch.Tensor]]:
        pix = processor(images=images, return_tensors="pt")["pixel_values"].to(_input_device(model), dtype)
        hs = encoder(pixel_values=pix, output_hidden_states=True).hidden_states
        out = {}
        for i in _vision_layers(layers):
            tok = _grid_tokens(hs[i], pix, patch)
            out[f"vision.{i}"] = list(tok.unbind(0))
        return out

    return _Adapter(model_type, int(cfg.num_hidden_layers), None, run)


def _prompt(processor: Any, image_text: str, instruction: str | None) -> str:
    if instruction is None:
        return image_text
    # instruction first, then the image (Pfram paper, Sec. 5): with causal attention
    # only tokens before the image can change the hidden states at image positions
    messages = [{"role": "user", "content": [{"type": "text", "text": instruction}, {"type": "image"}]}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _llm_states(
    outputs: Any, input_ids: torch.Tensor, image_token_id: int, layers: list[str]
) -> dict[str, list[torch.Tensor]]:
    hs = outputs.hidden_states
    mask = input_ids == image_token_id
    out: dict[str, list[torch.Tensor]] = {}
    for i in _llm_layers(layers):
        h = hs[i]
        m = mask.to(h.device)
        out[f"llm.{i}"] = [h[b][m[b]] for b in range(h.shape[0])]
    return out


def _vlm_adapter(
    path: str,
    model_type: str,
    device: str,
    dtype: torch.dtype,
    device_map: Any,
    instruction: str | None,
    processor_kwargs: dict[str, Any],
) -> _Adapter:
    from transformers import (
        AutoModelForImageTextToText,
        AutoProcessor,
    )  # deferred: transformers (imports torch) is heavy to import

    model = _load_model(AutoModelForImageTextToText, path, device, dtype, device_map)
    processor = AutoProcessor.from_pretrained(path, **processor_kwargs)
    cfg = model.config
    text_cfg = cfg.get_text_config()
    vis_cfg = cfg.vision_config
    image_token_id = int(cfg.image_token_id)
    inner = model.model
    n_vision = int(getattr(vis_cfg, "depth", None) or vis_cfg.num_hidden_layers)

    if model_type in QWEN:
        image_text = "<|vision_start|><|image_pad|><|vision_end|>"
    else:
        image_text = getattr(processor, "image_token", "<image>")

    def run(images: list[Any], layers: list[str]) -> dict[str, list[torch.Tensor]]:
        text = [_prompt(processor, image_text, instruction)] * len(images)
        enc = processor(text=text, images=images, return_tensors="pt", padding=True)
        dev = _input_device(model)
        enc = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in enc.items()}
        if "pixel_values" in enc:
            enc["pixel_values"] = enc["pixel_values"].to(dtype)
        out: dict[str, list[torch.Tensor]] = {}
        if _llm_layers(layers):
            outputs = model(**enc, output_hidden_states=True, use_cache=False)
            out.update(_llm_states(outputs, enc["input_ids"], image_token_id, layers))
        vis = _vision_layers(layers)
        if vis:
            if model_type in QWEN:
                grid = enc["image_grid_thw"]
                vo = inner.visual(enc["pixel_values"], grid_thw=grid, output_hidden_states=True)
                sizes = grid.prod(-1).tolist()
                for i in vis:
                    out[f"vision.{i}"] = list(torch.split(vo.hidden_states[i], sizes))
            else:
                pix = enc["pixel_values"]
                if pix.ndim == 5:  # anyres crops: [b, crops, 3, H, W]; crop 0 is the base image
                    pix = pix[:, 0]
                vo = inner.vision_tower(pix, output_hidden_states=True)
                for i in vis:
                    tok = _grid_tokens(vo.hidden_states[i], pix, int(vis_cfg.patch_size))
                    out[f"vision.{i}"] = list(tok.unbind(0))
        return out

    return _Adapter(model_type, n_vision, int(text_cfg.num_hidden_layers), run)


def _load_adapter(
    model: str,
    device: str,
    dtype: torch.dtype,
    device_map: Any,
    instruction: str | None,
    processor_kwargs: dict[str, Any],
) -> _Adapter:
    from transformers import AutoConfig  # deferred: transformers (imports torch) is heavy to import

    try:
        cfg = AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as exc:
        where = (
            "the directory has no loadable config.json"
            if Path(model).is_dir()
            else ("no such local directory, and not loadable as a Hugging Face hub name (offline, or a typo?)")
        )
        raise FileNotFoundError(
            f"model: cannot load {model!r}: {where} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    model_type = cfg.model_type
    key = (
        "pfram-extract",
        model,
        model_type,
        device,
        str(dtype),
        str(device_map),
        instruction,
        json.dumps(processor_kwargs, sort_keys=True),
    )
    if model_type in PLAIN_VISION:
        if instruction is not None:
            raise ValueError(f"instruction: a plain vision encoder ({model_type}) takes no text")
        build = lambda: _plain_adapter(model, model_type, device, dtype, device_map, processor_kwargs)
    elif model_type in LLAVA or model_type in QWEN:
        build = lambda: _vlm_adapter(model, model_type, device, dtype, device_map, instruction, processor_kwargs)
    else:
        build = None
    if build is not None:
        try:
            return cached(key, build)
        except OSError as exc:  # missing or damaged weight / processor files
            raise FileNotFoundError(f"model: cannot load {model!r} ({model_type}): {exc}") from exc
    raise ValueError(
        f"model: architecture {model_type!r} is not supported for Pfram extraction"
        f" (supported: {', '.join(PLAIN_VISION + LLAVA + QWEN)})"
    )
