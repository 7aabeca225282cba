"""Image representations for Pfram, extracted from HF checkpoints.

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

On-disk format (a directory, ``FORMAT`` / ``FORMAT_VERSION`` in ``meta.json``):

- ``meta.json``: model, architecture, resolved layer names, instruction, dtype,
  the ordered image ids, ``shard_size``, the lmms-scene version.
- ``shard_00000.safetensors``, ...: for each layer ``L`` a float16 tensor ``L`` of
  shape ``[sum of N_i, d]`` (the images' patch vectors, concatenated in image order)
  and an int64 tensor ``L.n_patches`` ``[b]``; safetensors metadata ``image_ids``
  (JSON list). Shards are written to a temporary name and renamed, so a shard
  either exists whole or not at all: an interrupted run resumes at the first
  missing shard.

Several GPUs: ``device_map="auto"`` shards the model with ``accelerate``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

FORMAT = "lmms-scene-pfram-features"
FORMAT_VERSION = 1

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

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "FeatureStore",
    "extract_features",
    "load_features",
    "parse_layers",
    "read_meta",
]

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


def _plain_adapter(
    path: str, model_type: str, device: str, dtype: torch.dtype, device_map: Any, processor_kwargs: dict[str, Any]
) -> _Adapter:
    from transformers import AutoImageProcessor, AutoModel

    model = AutoModel.from_pretrained(path, dtype=dtype, device_map=device_map)
    if device_map is None:
        model.to(device)
    model.eval()
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
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype, device_map=device_map)
    if device_map is None:
        model.to(device)
    model.eval()
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
    from transformers import AutoConfig

    from lmms_scene.cache import cached

    cfg = AutoConfig.from_pretrained(model)
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
        return cached(key, lambda: _plain_adapter(model, model_type, device, dtype, device_map, processor_kwargs))
    if model_type in LLAVA or model_type in QWEN:
        return cached(
            key, lambda: _vlm_adapter(model, model_type, device, dtype, device_map, instruction, processor_kwargs)
        )
    raise ValueError(
        f"model: architecture {model_type!r} is not supported for Pfram extraction"
        f" (supported: {', '.join(PLAIN_VISION + LLAVA + QWEN)})"
    )


# ---------------------------------------------------------------------------
# storage
# ---------------------------------------------------------------------------


def read_meta(features_dir: str | Path) -> dict[str, Any]:
    path = Path(features_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"no Pfram features at {features_dir} (meta.json missing)")
    meta = json.loads(path.read_text())
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: not a {FORMAT} v{FORMAT_VERSION} directory")
    return meta


def _shard_path(out: Path, k: int) -> Path:
    return out / f"shard_{k:05d}.safetensors"


def _shard_ids(meta: dict[str, Any], k: int) -> list[str]:
    s = meta["shard_size"]
    return meta["image_ids"][k * s : (k + 1) * s]


class FeatureStore:
    """Read access to an extracted features directory."""

    def __init__(self, features_dir: str | Path):
        self.dir = Path(features_dir)
        self.meta = read_meta(self.dir)

    @property
    def layers(self) -> list[str]:
        return list(self.meta["layers"])

    @property
    def n_shards(self) -> int:
        s, n = self.meta["shard_size"], len(self.meta["image_ids"])
        return (n + s - 1) // s

    def missing_shards(self) -> list[int]:
        return [k for k in range(self.n_shards) if not _shard_path(self.dir, k).is_file()]

    def load(self, layer: str) -> tuple[list[str], list[torch.Tensor]]:
        """(image ids, per-image float16 ``[N_i, d]``) for one layer, in extraction order."""
        from safetensors import safe_open

        if layer not in self.meta["layers"]:
            raise KeyError(f"layer {layer!r} not in {self.dir} (has {self.meta['layers']})")
        missing = self.missing_shards()
        if missing:
            raise RuntimeError(
                f"{self.dir}: extraction incomplete, shards {missing[:5]} missing; rerun extract to resume"
            )
        ids: list[str] = []
        feats: list[torch.Tensor] = []
        for k in range(self.n_shards):
            with safe_open(str(_shard_path(self.dir, k)), framework="pt") as f:
                shard_ids = json.loads(f.metadata()["image_ids"])
                flat = f.get_tensor(layer)
                counts = f.get_tensor(f"{layer}.n_patches").tolist()
            ids.extend(shard_ids)
            feats.extend(torch.split(flat, counts))
        return ids, feats


def load_features(features_dir: str | Path, layer: str) -> tuple[list[str], list[torch.Tensor]]:
    """Shortcut for ``FeatureStore(features_dir).load(layer)``."""
    return FeatureStore(features_dir).load(layer)


def _write_shard(path: Path, ids: list[str], feats: dict[str, list[torch.Tensor]]) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for layer, per_image in feats.items():
        if len(per_image) != len(ids):
            raise RuntimeError(f"layer {layer}: {len(per_image)} images, expected {len(ids)}")
        tensors[layer] = torch.cat([t.detach().float().cpu() for t in per_image]).half().contiguous()
        if not torch.isfinite(tensors[layer]).all():
            raise FloatingPointError(f"layer {layer}: NaN/inf after float16 conversion (values beyond +-65504?)")
        tensors[f"{layer}.n_patches"] = torch.tensor([t.shape[0] for t in per_image], dtype=torch.int64)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"image_ids": json.dumps(ids)})
    os.replace(tmp, path)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for s in range(0, len(items), size):
        yield items[s : s + size]


def extract_features(
    model: str,
    images: Sequence[str | Path],
    out_dir: str | Path,
    *,
    layers: str | Sequence[str] = "llm.every4",
    image_ids: Sequence[str] | None = None,
    instruction: str | None = None,
    batch_size: int = 8,
    shard_size: int = 64,
    device: str = "cpu",
    dtype: str = "float32",
    device_map: Any = None,
    processor_kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    process_index: int = 0,
    num_processes: int = 1,
) -> Path:
    """Extract the chosen layers' image representations into ``out_dir`` (resumable).

    Args:
        model: a local checkpoint directory or hub name loadable with ``from_pretrained``.
        images: image file paths, in the order to store them.
        image_ids: the ids to store (default: the file names); they key the labels.
        layers: a selection for :func:`parse_layers`.
        instruction: text put before the image in one user turn (Pfram paper,
            Sec. 5), so that it can change the LLM's states at the image positions;
            default: the image alone, as in the paper's main results.
        batch_size: images per forward pass; shard_size: images per shard file.
        device / dtype: where and in which precision the model runs; the
            stored vectors are float16 either way.
        device_map: passed to ``from_pretrained`` (``"auto"`` spreads a model over GPUs).
        processor_kwargs: passed to the processor's ``from_pretrained`` (for example
            ``{"max_pixels": 50176}`` for Qwen2-VL); recorded in ``meta.json``.
        progress: called with (images done, total) after each shard.
        process_index / num_processes: data parallelism (``accelerate launch``): this
            process writes shards ``k`` with ``k % num_processes == process_index``
            into the same directory; together the processes write every shard.

    A second call with the same arguments skips the shards already written; a call
    whose model, layers, instruction, images or shard size differ from the
    directory's ``meta.json`` is refused.
    """
    from PIL import Image

    import lmms_scene

    images = [Path(p) for p in images]
    ids = [str(i) for i in image_ids] if image_ids is not None else [p.name for p in images]
    if len(ids) != len(images):
        raise ValueError(f"image_ids: {len(ids)} ids for {len(images)} images")
    if len(set(ids)) != len(ids):
        raise ValueError("image_ids: duplicate ids")
    if not images:
        raise ValueError("images: nothing to extract")
    missing = [str(p) for p in images if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image file(s) not found, e.g. {missing[:3]}")
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}.get(dtype)
    if torch_dtype is None:
        raise ValueError(f"dtype: expected float32, float16 or bfloat16, got {dtype!r}")
    if batch_size < 1 or shard_size < 1:
        raise ValueError("batch_size and shard_size must be >= 1")
    if not 0 <= process_index < num_processes:
        raise ValueError(f"process_index: expected 0 <= process_index < num_processes={num_processes}, got {process_index}")

    processor_kwargs = dict(processor_kwargs or {})
    adapter = _load_adapter(model, device, torch_dtype, device_map, instruction, processor_kwargs)
    names = parse_layers(layers, adapter.n_vision, adapter.n_llm)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": str(model),
        "architecture": adapter.architecture,
        "layers": names,
        "instruction": instruction,
        "model_dtype": dtype,
        "processor_kwargs": processor_kwargs,
        "stored_dtype": "float16",
        "image_ids": ids,
        "shard_size": shard_size,
        "lmms_scene_version": getattr(lmms_scene, "__version__", "unknown"),
    }
    meta_path = out / "meta.json"
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        keys = (
            "format",
            "format_version",
            "model",
            "layers",
            "instruction",
            "model_dtype",
            "processor_kwargs",
            "image_ids",
            "shard_size",
        )
        diff = [k for k in keys if old.get(k) != meta[k]]
        if diff:
            raise ValueError(f"{out} holds features from a different run (differs in {diff}); use a new directory")
    else:
        # every process writes the same meta; a per-process temporary name keeps
        # concurrent writers from clobbering each other's half-written file
        tmp = meta_path.with_name(f"meta.json.{process_index}.tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, meta_path)

    n_shards = (len(ids) + shard_size - 1) // shard_size
    done = 0
    mine = [k for k in range(n_shards) if k % num_processes == process_index]
    total = sum(len(images[k * shard_size : (k + 1) * shard_size]) for k in mine)
    for k in mine:
        shard_imgs = images[k * shard_size : (k + 1) * shard_size]
        path = _shard_path(out, k)
        if not path.is_file():
            feats: dict[str, list[torch.Tensor]] = {n: [] for n in names}
            with torch.no_grad():
                for batch in _batches(shard_imgs, batch_size):
                    pil = []
                    for p in batch:
                        with Image.open(p) as im:
                            pil.append(im.convert("RGB"))
                    got = adapter.run(pil, names)
                    for n in names:
                        feats[n].extend(got[n])
            _write_shard(path, ids[k * shard_size : (k + 1) * shard_size], feats)
        done += len(shard_imgs)
        if progress is not None:
            progress(done, total)
    return out
