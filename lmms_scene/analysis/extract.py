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

On-disk format v2 (a directory, ``FORMAT`` / ``FORMAT_VERSION`` in ``meta.json``):

- ``meta.json``: model, architecture, resolved layer names, instruction, dtype,
  the ordered image ids, ``shard_size``, the lmms-scene version.
- ``shard_00000.safetensors``, ...: for each layer ``L`` a float16 tensor ``L`` of
  shape ``[sum of N_i, d]`` (the images' patch vectors, concatenated in image order)
  and an int64 tensor ``L.n_patches`` ``[b]``; one safetensors metadata entry
  ``lmms_scene_shard``, a JSON object with ``image_ids`` and ``layers`` (the images
  and layers the shard holds, in order), ``sha256`` (tensor name -> digest of its
  bytes), ``format`` and ``format_version``. Reading checks every shard against ``meta.json`` (its ids,
  in order, are meta.json's ids for that shard; same layers; checksums; finite
  values), so a swapped, copied, truncated or corrupt shard is an error naming
  it, and ``extract`` re-extracts such a shard. Shards are written to a temporary
  name and renamed, so a shard either exists whole or not at all: an interrupted
  run resumes at the first missing shard. Version 1 directories (ids but no
  layer list or checksums in the shards) are still read; extract does not add to them.

Several GPUs: ``device_map="auto"`` shards the model with ``accelerate``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageFile

import lmms_scene
from lmms_scene.cache import cached, load_pretrained

FORMAT = "lmms-scene-pfram-features"
FORMAT_VERSION = 2
#: format versions this lmms-scene reads (v1 shards carry image ids but no layer list or checksums)
READABLE_VERSIONS = (1, 2)

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
    "READABLE_VERSIONS",
    "FeatureStore",
    "ShardError",
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


# ---------------------------------------------------------------------------
# storage
# ---------------------------------------------------------------------------

#: how to repair a damaged features directory (quoted in every shard error)
REPAIR = "re-run the same `lmms-scene pfram extract` command into this directory: it re-extracts that shard"

_SHARD_NAME = re.compile(r"^shard_(\d{5,})\.safetensors$")


class ShardError(ValueError):
    """A shard file that is truncated, corrupt, misordered, duplicated or not the one
    ``meta.json`` expects; ``path`` is the file and ``reason`` says what is wrong."""

    def __init__(self, path: str | Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def read_meta(features_dir: str | Path) -> dict[str, Any]:
    """``meta.json`` of a features directory, checked: format, version, layers, image ids
    (non-empty strings, no duplicates) and shard size. Reads format versions 1 and 2."""
    path = Path(features_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"no Pfram features at {features_dir} (meta.json missing)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} directory (no 'format': {FORMAT!r})")
    version = meta.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{path}: format_version {version!r}; this lmms-scene reads versions {list(READABLE_VERSIONS)}"
            " (written by a newer lmms-scene?)"
        )
    ids = meta.get("image_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise ValueError(f"{path}: 'image_ids' must be a non-empty list of non-empty strings")
    dups = _duplicates(ids)
    if dups:
        raise ValueError(f"{path}: image id(s) listed more than once: {dups[:5]}")
    size = meta.get("shard_size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{path}: 'shard_size' must be a positive integer, got {size!r}")
    layers = meta.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(x, str) for x in layers):
        raise ValueError(f"{path}: 'layers' must be a non-empty list of layer names, got {layers!r}")
    return meta


def _duplicates(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for x in items:
        if x in seen and x not in dups:
            dups.append(x)
        seen.add(x)
    return dups


def _shard_path(out: Path, k: int) -> Path:
    return out / f"shard_{k:05d}.safetensors"


def _n_shards(meta: dict[str, Any]) -> int:
    s, n = meta["shard_size"], len(meta["image_ids"])
    return (n + s - 1) // s


def _shard_ids(meta: dict[str, Any], k: int) -> list[str]:
    s = meta["shard_size"]
    return meta["image_ids"][k * s : (k + 1) * s]


def _digest(t: torch.Tensor) -> str:
    # hash the tensor's own memory (no copy: shards can be gigabytes)
    return hashlib.sha256(memoryview(t.contiguous().numpy()).cast("B")).hexdigest()


#: the one safetensors metadata key of a v2 shard (one key, because safetensors writes
#: several keys in hash order and shards should be byte-for-byte reproducible)
SHARD_KEY = "lmms_scene_shard"


def _shard_info(info: dict[str, str], path: Path, version: int) -> dict[str, Any]:
    """The shard's own record: image_ids (v1 and v2), layers and sha256 (v2)."""
    key = SHARD_KEY if version >= 2 else "image_ids"
    if key not in info:
        raise ShardError(
            path, f"no {key!r} in the shard's metadata (not written by lmms-scene pfram extract v{version}?)"
        )
    try:
        value = json.loads(info[key])
    except json.JSONDecodeError:
        raise ShardError(path, f"the shard's {key!r} metadata is not valid JSON") from None
    if version < 2:
        return {"image_ids": value}
    if not isinstance(value, dict) or not {"image_ids", "layers", "sha256"} <= set(value):
        raise ShardError(path, f"the shard's {key!r} metadata lacks image_ids, layers or sha256")
    if value.get("format_version") != version:
        raise ShardError(path, f"shard format version {value.get('format_version')!r}, meta.json has {version}")
    if not isinstance(value["sha256"], dict):
        raise ShardError(path, "the shard's 'sha256' record is not a JSON object")
    return value


def _check_ids(path: Path, ids: Any, meta: dict[str, Any], k: int) -> None:
    """The shard's own image ids must be exactly meta.json's ids for shard k, in order."""
    want = _shard_ids(meta, k)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ShardError(path, "the shard's 'image_ids' metadata is not a list of strings")
    if ids == want:
        return
    dups = _duplicates(ids)
    if dups:
        raise ShardError(path, f"lists image id(s) {dups[:5]} more than once")
    for j in range(_n_shards(meta)):
        if j != k and ids == _shard_ids(meta, j):
            raise ShardError(
                path,
                f"holds the images of shard {j} ({_shard_path(path.parent, j).name}: {ids[:3]}...), not those of"
                f" shard {k} ({want[:3]}...): shard files swapped, copied or renamed",
            )
    if set(ids) == set(want):
        p = next(i for i, (a, b) in enumerate(zip(ids, want)) if a != b)
        raise ShardError(
            path, f"holds shard {k}'s images in another order (position {p}: {ids[p]!r}, meta.json: {want[p]!r})"
        )
    have = set(ids)
    missing = [x for x in want if x not in have]
    wanted = set(want)
    extra = [x for x in ids if x not in wanted]
    raise ShardError(
        path,
        f"holds {len(ids)} image ids where meta.json expects {len(want)} for shard {k}:"
        f" missing {missing[:5]}, not expected here {extra[:5]}",
    )


def _verify_shard(
    path: Path, meta: dict[str, Any], k: int, layers: Sequence[str], *, keep: bool = True
) -> dict[str, tuple[torch.Tensor, list[int]]]:
    """Open shard ``k`` and check it against ``meta`` (ids, layers, shapes, checksums,
    finite values); return ``{layer: (flat [sum N_i, d], patch counts)}`` for ``layers``
    (empty when ``keep`` is False). Any problem is a :class:`ShardError` naming the file."""
    from safetensors import SafetensorError, safe_open  # deferred: safetensors is heavy to import

    if not path.is_file():
        raise ShardError(path, "missing")
    version = meta["format_version"]
    out: dict[str, tuple[torch.Tensor, list[int]]] = {}
    try:
        with safe_open(str(path), framework="pt") as f:
            info = f.metadata() or {}
            keys = set(f.keys())
            record = _shard_info(info, path, version)
            ids = record["image_ids"]
            _check_ids(path, ids, meta, k)
            digests: dict[str, str] = record.get("sha256", {})
            if version >= 2 and record["layers"] != list(meta["layers"]):
                raise ShardError(path, f"holds layers {record['layers']}, meta.json lists {meta['layers']}")
            for layer in layers:
                if layer not in keys or f"{layer}.n_patches" not in keys:
                    raise ShardError(path, f"has no tensors for layer {layer!r} (has {sorted(keys)[:6]})")
                flat = f.get_tensor(layer)
                counts_t = f.get_tensor(f"{layer}.n_patches")
                for name, t in ((layer, flat), (f"{layer}.n_patches", counts_t)):
                    if version >= 2 and digests.get(name) != _digest(t):
                        raise ShardError(path, f"checksum mismatch in tensor {name!r}: the file is corrupt")
                if flat.ndim != 2 or not torch.is_floating_point(flat):
                    raise ShardError(
                        path,
                        f"layer {layer}: expected a float [sum N_i, d] tensor, got {flat.dtype} {tuple(flat.shape)}",
                    )
                counts = counts_t.tolist()
                if counts_t.ndim != 1 or len(counts) != len(ids):
                    raise ShardError(path, f"layer {layer}: {len(counts)} patch counts for {len(ids)} images")
                empty = [ids[i] for i, c in enumerate(counts) if c < 1]
                if empty:
                    raise ShardError(path, f"layer {layer}: image(s) {empty[:5]} have no patch vectors")
                if sum(counts) != flat.shape[0]:
                    raise ShardError(
                        path,
                        f"layer {layer}: patch counts sum to {sum(counts)} but the tensor has {flat.shape[0]} rows",
                    )
                if not torch.isfinite(flat).all():
                    for image_id, t in zip(ids, torch.split(flat, counts)):
                        bad = (~torch.isfinite(t)).nonzero()
                        if len(bad):
                            p, c = bad[0].tolist()
                            raise ShardError(
                                path, f"layer {layer}: image {image_id!r} patch {p} holds {t[p, c].item()}"
                            )
                if keep:
                    out[layer] = (flat, counts)
    except ShardError:
        raise
    except (SafetensorError, OSError, RuntimeError, ValueError) as exc:  # truncated or damaged file
        raise ShardError(path, f"unreadable: truncated or corrupt ({type(exc).__name__}: {exc})") from exc
    return out


def _stray_shards(features_dir: Path, n_shards: int) -> list[Path]:
    out = []
    for p in sorted(features_dir.glob("shard_*.safetensors")):
        m = _SHARD_NAME.match(p.name)
        if m is None or int(m.group(1)) >= n_shards or p.name != _shard_path(features_dir, int(m.group(1))).name:
            out.append(p)
    return out


class FeatureStore:
    """Read access to an extracted features directory.

    Every shard is checked when read: its own image ids must be meta.json's ids for
    that shard, in order (a swapped, copied or renamed shard is an error), its layer
    list and tensor checksums must match (format v2), its patch counts must cover its
    tensor and every value must be finite. Errors are :class:`ShardError` naming the file.
    """

    def __init__(self, features_dir: str | Path):
        self.dir = Path(features_dir)
        self.meta = read_meta(self.dir)

    @property
    def layers(self) -> list[str]:
        return list(self.meta["layers"])

    @property
    def image_ids(self) -> list[str]:
        return list(self.meta["image_ids"])

    @property
    def n_shards(self) -> int:
        return _n_shards(self.meta)

    def missing_shards(self) -> list[int]:
        return [k for k in range(self.n_shards) if not _shard_path(self.dir, k).is_file()]

    def verify(self, layers: Sequence[str] | None = None) -> list[ShardError]:
        """Every problem found in the shards (all layers unless ``layers``); empty when sound."""
        chosen = self.layers if layers is None else list(layers)
        problems = [
            ShardError(p, f"not part of this directory ({self._layout()})")
            for p in _stray_shards(self.dir, self.n_shards)
        ]
        for k in range(self.n_shards):
            try:
                _verify_shard(_shard_path(self.dir, k), self.meta, k, chosen, keep=False)
            except ShardError as exc:
                problems.append(exc)
        return problems

    def _layout(self) -> str:
        n, s = len(self.meta["image_ids"]), self.meta["shard_size"]
        return f"meta.json lists {n} images in {self.n_shards} shard(s) of {s}"

    def load(self, layer: str) -> tuple[list[str], list[torch.Tensor]]:
        """(image ids, per-image float16 ``[N_i, d]``) for one layer, in extraction order."""
        if layer not in self.meta["layers"]:
            raise KeyError(f"layer {layer!r} not in {self.dir} (has {self.meta['layers']})")
        missing = self.missing_shards()
        if missing:
            names = [_shard_path(self.dir, k).name for k in missing[:5]]
            raise RuntimeError(
                f"{self.dir}: extraction incomplete, {len(missing)} shard(s) missing ({', '.join(names)});"
                " rerun extract to resume"
            )
        stray = _stray_shards(self.dir, self.n_shards)
        if stray:
            raise ShardError(stray[0], f"not part of this directory ({self._layout()}); move it away")
        ids: list[str] = []
        feats: list[torch.Tensor] = []
        dim: tuple[int, Path] | None = None
        for k in range(self.n_shards):
            path = _shard_path(self.dir, k)
            try:
                flat, counts = _verify_shard(path, self.meta, k, [layer])[layer]
            except ShardError as exc:
                raise ShardError(exc.path, f"{exc.reason}; {REPAIR}") from exc
            if dim is None:
                dim = (flat.shape[1], path)
            elif flat.shape[1] != dim[0]:
                raise ShardError(path, f"layer {layer}: hidden size {flat.shape[1]}, but {dim[1].name} has {dim[0]}")
            ids.extend(_shard_ids(self.meta, k))
            feats.extend(torch.split(flat, counts))
        return ids, feats


def load_features(features_dir: str | Path, layer: str) -> tuple[list[str], list[torch.Tensor]]:
    """Shortcut for ``FeatureStore(features_dir).load(layer)``."""
    return FeatureStore(features_dir).load(layer)


def _write_shard(path: Path, ids: list[str], feats: dict[str, list[torch.Tensor]]) -> None:
    """Write one shard (format v2): per layer the float16 vectors and patch counts; in the
    metadata the shard's image ids, its layer names and each tensor's sha256."""
    from safetensors.torch import save_file  # deferred: safetensors is heavy to import

    tensors: dict[str, torch.Tensor] = {}
    for layer, per_image in feats.items():
        if len(per_image) != len(ids):
            raise RuntimeError(f"{path.name}: layer {layer}: {len(per_image)} images, expected {len(ids)}")
        full = [t.detach().float().cpu() for t in per_image]
        half = torch.cat(full).half().contiguous()
        if not torch.isfinite(half).all():
            bad = [(i, float(t.abs().max())) for i, t in zip(ids, full) if not torch.isfinite(t.half()).all()]
            raise ValueError(
                f"{path}: layer {layer}: image(s) {[i for i, _ in bad[:5]]} have values that float16 cannot hold"
                f" (largest absolute value {bad[0][1]:g}; NaN, inf or beyond +-65504)"
            )
        tensors[layer] = half
        tensors[f"{layer}.n_patches"] = torch.tensor([t.shape[0] for t in per_image], dtype=torch.int64)
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "image_ids": ids,
        "layers": list(feats),
        "sha256": {name: _digest(t) for name, t in tensors.items()},
    }
    metadata = {SHARD_KEY: json.dumps(record)}
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    os.replace(tmp, path)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for s in range(0, len(items), size):
        yield items[s : s + size]


@contextlib.contextmanager
def _strict_decoding() -> Iterator[None]:
    # lmms-eval sets PIL's LOAD_TRUNCATED_IMAGES when imported, which decodes a cut-off
    # JPEG as a grey-filled image; features of such an image must be an error instead
    saved = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = saved


def _open_rgb(path: Path, image_id: str) -> Any:
    """The fully decoded RGB image; a ValueError naming the id and file when it cannot be."""
    try:
        with Image.open(path) as im:
            im.load()
            return im.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"image {image_id!r} ({path}): cannot be decoded ({type(exc).__name__}: {exc})") from None


def _check_images(paths: Sequence[Path], ids: Sequence[str]) -> None:
    bad = []
    for p, i in zip(paths, ids):
        try:
            _open_rgb(p, i)
        except ValueError as exc:
            bad.append(str(exc))
    if bad:
        raise ValueError(f"{len(bad)} image(s) cannot be decoded; fix or leave them out: " + "; ".join(bad[:5]))


#: meta.json keys that must match for a directory to be resumed (``layers`` is compared
#: once the model is loaded, because ``llm.every4`` resolves against the model)
_RUN_KEYS = (
    "format",
    "format_version",
    "model",
    "instruction",
    "model_dtype",
    "processor_kwargs",
    "image_ids",
    "shard_size",
)


def _resume_meta(out: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    """The existing meta.json of ``out`` when it is the same run (None when there is none)."""
    if not (out / "meta.json").is_file():
        return None
    old = read_meta(out)
    if old["format_version"] != FORMAT_VERSION:
        raise ValueError(
            f"{out}: written by an older lmms-scene (features format v{old['format_version']}, shards without layer"
            f" lists or checksums); `pfram score` still reads it, but extract writes only v{FORMAT_VERSION}:"
            " extract into a new directory"
        )
    diff = [k for k in _RUN_KEYS if old.get(k) != meta[k]]
    if diff:
        raise ValueError(f"{out} holds features from a different run (differs in {diff}); use a new directory")
    return old


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

    A second call with the same arguments skips the shards already written and sound,
    and re-extracts (with a warning naming it and what is wrong) any shard that is
    truncated, corrupt or not the one meta.json expects; a call whose model, layers,
    instruction, images or shard size differ from the directory's ``meta.json`` is
    refused. Every image still to extract is decoded in full before the model is
    loaded, so an unreadable or truncated image fails at once, naming its id and file.
    """
    images = [Path(p) for p in images]
    ids = [str(i) for i in image_ids] if image_ids is not None else [p.name for p in images]
    if len(ids) != len(images):
        raise ValueError(f"image_ids: {len(ids)} ids for {len(images)} images")
    dups = _duplicates(ids)
    if dups:
        raise ValueError(f"image_ids: duplicate ids {dups[:5]}")
    if not images:
        raise ValueError("images: nothing to extract")
    missing = [str(p) for p in images if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image file(s) not found, e.g. {missing[:3]}")
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}.get(dtype)
    if torch_dtype is None:
        raise ValueError(f"dtype: expected float32, float16 or bfloat16, got {dtype!r}")
    for name, value in (("batch_size", batch_size), ("shard_size", shard_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    if not 0 <= process_index < num_processes:
        raise ValueError(
            f"process_index: expected 0 <= process_index < num_processes={num_processes}, got {process_index}"
        )

    processor_kwargs = dict(processor_kwargs or {})
    out = Path(out_dir)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": str(model),
        "architecture": None,
        "layers": None,
        "instruction": instruction,
        "model_dtype": dtype,
        "processor_kwargs": processor_kwargs,
        "stored_dtype": "float16",
        "image_ids": ids,
        "shard_size": shard_size,
        "lmms_scene_version": getattr(lmms_scene, "__version__", "unknown"),
    }
    old = _resume_meta(out, meta)
    n_shards = (len(ids) + shard_size - 1) // shard_size
    mine = [k for k in range(n_shards) if k % num_processes == process_index]
    # the shards this process must (re)write: absent, or failing the checks against meta.json
    todo: dict[int, str | None] = {}
    for k in mine:
        path = _shard_path(out, k)
        if old is None or not path.is_file():
            todo[k] = None
            continue
        try:
            _verify_shard(path, old, k, old["layers"], keep=False)
        except ShardError as exc:
            todo[k] = exc.reason
    with _strict_decoding():
        pending = [k for k in mine if k in todo]
        _check_images(
            [p for k in pending for p in images[k * shard_size : (k + 1) * shard_size]],
            [i for k in pending for i in ids[k * shard_size : (k + 1) * shard_size]],
        )
        adapter = _load_adapter(model, device, torch_dtype, device_map, instruction, processor_kwargs)
        names = parse_layers(layers, adapter.n_vision, adapter.n_llm)
        meta.update(architecture=adapter.architecture, layers=names)
        if old is not None and old["layers"] != names:
            raise ValueError(f"{out} holds features from a different run (differs in ['layers']); use a new directory")
        out.mkdir(parents=True, exist_ok=True)
        meta_path = out / "meta.json"
        if old is None:
            # every process writes the same meta; a per-process temporary name keeps
            # concurrent writers from clobbering each other's half-written file
            tmp = meta_path.with_name(f"meta.json.{process_index}.tmp")
            tmp.write_text(json.dumps(meta, indent=1))
            os.replace(tmp, meta_path)

        done = 0
        total = sum(len(images[k * shard_size : (k + 1) * shard_size]) for k in mine)
        for k in mine:
            shard_imgs = images[k * shard_size : (k + 1) * shard_size]
            shard_ids = ids[k * shard_size : (k + 1) * shard_size]
            path = _shard_path(out, k)
            if k in todo:
                if todo[k] is not None:
                    warnings.warn(f"{path}: {todo[k]}; re-extracting it", stacklevel=2)
                feats: dict[str, list[torch.Tensor]] = {n: [] for n in names}
                with torch.no_grad():
                    for batch, batch_ids in zip(_batches(shard_imgs, batch_size), _batches(shard_ids, batch_size)):
                        pil = [_open_rgb(p, i) for p, i in zip(batch, batch_ids)]
                        try:
                            got = adapter.run(pil, names)
                        except (ValueError, RuntimeError, IndexError) as exc:
                            raise RuntimeError(
                                f"{model}: the forward pass failed on image(s) {batch_ids} ({type(exc).__name__}: {exc})"
                            ) from exc
                        for n in names:
                            feats[n].extend(got[n])
                _write_shard(path, shard_ids, feats)
            done += len(shard_imgs)
            if progress is not None:
                progress(done, total)
    return out
