"""The on-disk features of Pfram's extraction: writing a shard, reading and checking a
features directory (:class:`FeatureStore`).

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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

FORMAT = "lmms-scene-pfram-features"
FORMAT_VERSION = 2
#: format versions this lmms-scene reads (v1 shards carry image ids but no layer list or checksums)
READABLE_VERSIONS = (1, 2)


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
