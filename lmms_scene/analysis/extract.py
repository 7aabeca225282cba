"""Image representations for Pfram, extracted from HF checkpoints: the driver
(:func:`extract_features`: arguments checked, every image decoded in full before the model
loads, shards written and resumed). The model adapters and layer names are
:mod:`lmms_scene.analysis.adapters`; the on-disk format is :mod:`lmms_scene.analysis.shards`
(its public names are re-exported here).

Several GPUs: ``device_map="auto"`` shards the model with ``accelerate``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

import lmms_scene
from lmms_scene.analysis.adapters import _load_adapter, parse_layers
from lmms_scene.analysis.shards import (
    FORMAT,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    FeatureStore,
    ShardError,
    _duplicates,
    _shard_path,
    _verify_shard,
    _write_shard,
    load_features,
    read_meta,
)
from lmms_scene.data import release

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


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for s in range(0, len(items), size):
        yield items[s : s + size]


def _open_rgb(path: Path, image_id: str) -> Any:
    """The fully decoded RGB image; a ValueError naming the id and file when it cannot be.
    Decoded by :func:`lmms_scene.data.release.decode_image`, which never reads or sets PIL's
    global ``ImageFile.LOAD_TRUNCATED_IMAGES`` (lmms-eval switches it on at import, and
    other threads may be decoding): a cut-off JPEG is an error, never a grey-filled image."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"image {image_id!r} ({path}): cannot be read ({type(exc).__name__}: {exc})") from None
    with release.decode_image(data, f"{image_id!r} ({path})") as im:
        return im.convert("RGB")


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
