"""CLIP-based scores: CLIPScore, RefCLIPScore and CLIP text similarity.

Pure batch functions over PIL images and strings. The CLIP checkpoint is loaded once
per process through :func:`lmms_scene.cache.cached` (lazily: importing this module
loads nothing) and used under one lock, because Hugging Face fast tokenizers are not
safe to call from several threads and lmms-eval calls ``process_results`` from four.

Text embeddings are cached per checkpoint (labels, scene names and long forms repeat
thousands of times in a run); image embeddings are cached when the caller names the
image (COOCO scores one noise-free crop under six noise settings). Both caches are
bounded :class:`lmms_scene.cache.LRU`.

The checkpoint is, in order: the ``model`` argument, the configured one
(``LMMS_SCENE_CLIP_MODEL``, read by :mod:`lmms_scene.settings`, the one place that reads
configuration), ``openai/clip-vit-base-patch32`` (the checkpoint the COOCO authors used).
The value ``none`` switches the CLIP metrics off: they are then recorded as not
computed (``null``), never replaced by another model's scores.

With the default checkpoint (tests run this only where it is cached):

>>> from PIL import Image
>>> scores = ref_clip_score([Image.new("RGB", (64, 64))], ["A photo depicts a cup"], [["A photo depicts a mug"]])
>>> len(scores), 0.0 <= scores[0] <= 2.5
(1, True)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lmms_scene import settings
from lmms_scene.cache import LRU, cached, load_pretrained, torch_device
from lmms_scene.validation import reference_lists, same_length, texts

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from PIL import Image

DEFAULT_CLIP_MODEL = settings.DEFAULT_CLIP_MODEL
CLIP_MODEL_ENV = settings.CLIP_MODEL_ENV
#: the value of ``model`` / ``$LMMS_SCENE_CLIP_MODEL`` that switches CLIP metrics off
CLIP_DISABLED = settings.CLIP_DISABLED
#: Hessel et al. (2021), Section 3: CLIP-S = w * max(cos(c, v), 0) with w = 2.5.
CLIP_S_WEIGHT = 2.5
#: CLIP's text context; longer texts are cut to this many tokens, end-of-text kept.
MAX_TEXT_TOKENS = 77
#: Text embeddings kept per checkpoint (a 512-d float32 embedding is 2 KB).
TEXT_CACHE_SIZE = 50_000
#: Image embeddings kept per checkpoint, for callers that name their images (COOCO
#: scores the same noise-free crop once per noise setting: 6 times).
IMAGE_CACHE_SIZE = 20_000


class ClipModelUnavailable(RuntimeError):
    """The requested CLIP checkpoint could not be loaded."""


def resolve_model(model: str | os.PathLike | None = None) -> str:
    """The CLIP checkpoint to use: ``model``, else the configured one
    (:mod:`lmms_scene.settings`: ``$LMMS_SCENE_CLIP_MODEL``), else the default."""
    if model:
        return str(model)
    return settings.current().clip_model


#: why this process computes no CLIP metric although none was switched off: set by
#: :func:`for_sample_run` when a sample task finds the default checkpoint not at hand
_NOT_AT_HAND: str | None = None


def fetch_command(name: str = DEFAULT_CLIP_MODEL) -> str:
    """The command that puts a hub checkpoint into the local Hugging Face cache."""
    return f"hf download {name}"


def not_computed_reason(model: str | os.PathLike | None = None) -> str | None:
    """Why the CLIP metrics of ``model`` (see :func:`resolve_model`) are not computed in
    this process, or None when they are: switched off (``none``), or, in a sample run, the
    default checkpoint not in the local cache (:func:`for_sample_run`)."""
    name = resolve_model(model)
    if name.strip().lower() == CLIP_DISABLED:
        return f"CLIP metrics switched off ({CLIP_MODEL_ENV}={CLIP_DISABLED})"
    if _NOT_AT_HAND is not None and name == DEFAULT_CLIP_MODEL:
        return _NOT_AT_HAND
    return None


def switched_off(model: str | os.PathLike | None = None) -> bool:
    """True when the resolved checkpoint is ``none``: the CLIP metrics switched off on purpose.
    (What a task must load before the model runs: everything not switched off.)"""
    return resolve_model(model).strip().lower() == CLIP_DISABLED


def clip_enabled(model: str | os.PathLike | None = None) -> bool:
    """False when the CLIP metrics are not computed (:func:`not_computed_reason`)."""
    return not_computed_reason(model) is None


def for_sample_run() -> str | None:
    """The embedded ``*_sample`` tasks run anywhere, offline and with no setting: when no
    checkpoint was chosen and the default one is not in the local Hugging Face cache, the
    CLIP metrics of this process are recorded as not computed, with this reason (which
    names the command that fetches the checkpoint), and nothing is downloaded. Returns
    the reason, or None when CLIP is at hand (or a checkpoint was chosen explicitly: a
    chosen checkpoint that cannot be loaded stops the run, as in the full benchmarks).
    The full benchmarks never call this: there a missing checkpoint stops the run."""
    global _NOT_AT_HAND
    if settings.current().clip_model_explicit or resolve_model().strip().lower() == CLIP_DISABLED:
        return None
    if default_model_cached():
        _NOT_AT_HAND = None
        return None
    _NOT_AT_HAND = (
        f"{DEFAULT_CLIP_MODEL} is not in the local Hugging Face cache (sample run, nothing downloaded); "
        f"get it once with `{fetch_command()}`, or set {CLIP_MODEL_ENV} to a local CLIP folder"
    )
    return _NOT_AT_HAND


def default_model_cached() -> bool:
    """Whether the default checkpoint is in the local Hugging Face cache (no network)."""
    from huggingface_hub import try_to_load_from_cache  # deferred: huggingface_hub is heavy to import

    found = try_to_load_from_cache(DEFAULT_CLIP_MODEL, "config.json")
    return isinstance(found, str)


class ClipEncoder:
    """A loaded CLIP checkpoint with a text-embedding cache. Use :func:`encoder`."""

    def __init__(self, name: str, model, tokenizer, image_processor, device: str):
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.device = device
        self.max_tokens = min(MAX_TEXT_TOKENS, int(model.config.text_config.max_position_embeddings))
        self.eos_token_id = tokenizer.eos_token_id
        self._lock = threading.RLock()
        self._texts = LRU(TEXT_CACHE_SIZE)
        self._images = LRU(IMAGE_CACHE_SIZE)

    # -- text -------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> dict:
        """Token ids cut to ``max_tokens`` with the end-of-text token as the last kept
        token (CLIP pools the text at that token, so losing it would pool a word)."""
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
        )
        ids = batch["input_ids"]
        if self.eos_token_id is not None and ids.shape[1] == self.max_tokens:
            # Tokenizers add the special tokens after truncating, but a slow or custom
            # tokenizer may not: force the last token of a full row to be EOT.
            full = batch["attention_mask"].sum(dim=1) == self.max_tokens
            ids[full, -1] = self.eos_token_id
        return batch

    def embed_texts(self, texts: Sequence[str], batch_size: int = 256) -> torch.Tensor:
        """L2-normalised text embeddings, ``(len(texts), dim)`` on the CPU."""
        import torch  # deferred: torch is heavy to import

        texts = [str(t) for t in texts]
        with self._lock:
            # read the hits first: storing this call's new embeddings may evict them
            have: dict[str, torch.Tensor] = {}
            for t in dict.fromkeys(texts):
                hit = self._texts.get(t)
                if hit is not None:
                    have[t] = hit
            missing = [t for t in dict.fromkeys(texts) if t not in have]
            fresh = have
            for start in range(0, len(missing), batch_size):
                chunk = missing[start : start + batch_size]
                batch = self.tokenize(chunk)
                with torch.inference_mode():
                    out = self.model.get_text_features(
                        input_ids=batch["input_ids"].to(self.device),
                        attention_mask=batch["attention_mask"].to(self.device),
                    )
                emb = _normalise(_features(out)).float().cpu()
                for text, row in zip(chunk, emb):
                    self._texts.put(text, row)
                    fresh[text] = row
            rows = [fresh[t] for t in texts]
        if not rows:
            return torch.empty(0, self.model.config.projection_dim)
        return torch.stack(rows)

    # -- images -----------------------------------------------------------------------
    def embed_images(
        self, images: Sequence[Image.Image], batch_size: int = 64, keys: Sequence[Hashable] | None = None
    ) -> torch.Tensor:
        """L2-normalised image embeddings, ``(len(images), dim)`` on the CPU.

        With ``keys`` (one hashable per image, naming its pixels), embeddings are
        cached under them and images whose key was seen are not encoded again.
        """
        import torch  # deferred: torch is heavy to import

        if keys is not None:
            if len(keys) != len(images):
                raise ValueError(f"keys: {len(keys)} keys for {len(images)} images")
            with self._lock:  # hits read before anything is stored (a store may evict them)
                have = {k: hit for k in dict.fromkeys(keys) if (hit := self._images.get(k)) is not None}
                todo = {k: im for k, im in zip(keys, images) if k not in have}
                if todo:
                    for key, row in zip(todo, self.embed_images(list(todo.values()), batch_size)):
                        self._images.put(key, row)
                        have[key] = row
            rows = [have[k] for k in keys]
            return torch.stack(rows) if rows else torch.empty(0, self.model.config.projection_dim)

        chunks = []
        for start in range(0, len(images), batch_size):
            chunk = [im.convert("RGB") for im in images[start : start + batch_size]]
            pixels = self.image_processor(images=chunk, return_tensors="pt")["pixel_values"]
            with self._lock, torch.inference_mode():
                out = self.model.get_image_features(pixel_values=pixels.to(self.device, self.model.dtype))
            chunks.append(_normalise(_features(out)).float().cpu())
        if not chunks:
            return torch.empty(0, self.model.config.projection_dim)
        return torch.cat(chunks)


def _features(out) -> torch.Tensor:
    # transformers < 5 returns the projected tensor; 5.x returns an output object
    # whose pooler_output holds the projection.
    return out if hasattr(out, "norm") else out.pooler_output


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _load(name: str, device: str) -> ClipEncoder:
    try:
        from transformers import (
            AutoImageProcessor,
            AutoTokenizer,
            CLIPModel,
        )  # deferred: transformers (imports torch) is heavy to import

        model = load_pretrained(CLIPModel, name, device)
        tokenizer = AutoTokenizer.from_pretrained(name)
        image_processor = AutoImageProcessor.from_pretrained(name)
    except Exception as exc:
        cause = (str(exc).strip().splitlines() or [""])[0][:300]
        hub_id = name if "/" in name and not os.path.exists(name) else DEFAULT_CLIP_MODEL
        raise ClipModelUnavailable(
            f"Could not load the CLIP checkpoint {name!r} used by the lmms-scene metrics "
            f"({type(exc).__name__}: {cause}). Scores from another checkpoint are not comparable "
            f"with the paper's, so no fallback model is used. Get it once while online: "
            f"`{fetch_command(hub_id)}`; or set {CLIP_MODEL_ENV}=/path/to/clip (a folder holding a "
            f"CLIPModel and its processor, saved with save_pretrained)."
        ) from exc
    return ClipEncoder(name, model, tokenizer, image_processor, device)


def _device(device: str | None) -> str:
    return torch_device(device or settings.current().device)


def default_device() -> str:
    """The device the CLIP metrics run on when none is given (settings, else CUDA, else CPU)."""
    return _device(None)


def encoder(model: str | os.PathLike | None = None, device: str | None = None) -> ClipEncoder:
    """The process-wide :class:`ClipEncoder` for ``model`` (see :func:`resolve_model`) on
    ``device`` (default: the configured device, else CUDA when present, else CPU)."""
    global _NOT_AT_HAND
    name = resolve_model(model)
    if switched_off(name):
        raise ClipModelUnavailable(
            f"CLIP metrics are switched off ({CLIP_MODEL_ENV}={CLIP_DISABLED}); no CLIP model to use"
        )
    dev = _device(device)
    loaded = cached(("clip", name, dev), lambda: _load(name, dev))
    if name == DEFAULT_CLIP_MODEL:
        _NOT_AT_HAND = None  # it is at hand now (a full task of the same run loaded it)
    return loaded


def use_loaded(name: str, model, tokenizer, image_processor, device: str | None = None) -> ClipEncoder:
    """Register an already loaded CLIP under ``name`` (e.g. a model built in memory), so
    later calls with ``model=name`` use it instead of loading from disk. It is moved to
    ``device`` (default: the device :func:`encoder` uses, so the two always agree). If
    ``name`` is already loaded there, the loaded one is kept and returned."""
    dev = _device(device)
    return cached(("clip", name, dev), lambda: ClipEncoder(name, model.to(dev).eval(), tokenizer, image_processor, dev))


def _images(images) -> list:
    """``images`` as a list; a lone PIL image is one image."""
    if hasattr(images, "size") and hasattr(images, "convert"):
        return [images]
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise TypeError(f"images: expected a sequence of PIL images, got {type(images).__name__}: {images!r:.100}")
    return list(images)


@dataclass(frozen=True)
class RefClipParts:
    """Per-item components of RefCLIPScore (Hessel et al. 2021, Section 3/4)."""

    clip_score: list[float]
    reference_similarity: list[float]
    ref_clip_score: list[float]


def _clip_s(cos: float) -> float:
    # Hessel et al. (2021), Eq. 1: CLIP-S(c, v) = w * max(cos(c, v), 0), w = 2.5.
    return CLIP_S_WEIGHT * max(cos, 0.0)


def _harmonic(a: float, b: float) -> float:
    # Hessel et al. (2021), Eq. 2: RefCLIP-S = H-Mean(CLIP-S, max(max_r cos(c, r), 0)).
    return 0.0 if a <= 0 or b <= 0 else 2 * a * b / (a + b)


def clip_score(
    images: Sequence[Image.Image],
    candidates: Sequence[str],
    model: str | None = None,
    image_keys: Sequence[Hashable] | None = None,
) -> list[float]:
    """CLIP-S = 2.5 * max(cos(E_image, E_text), 0) for each (image, candidate) pair.

    Candidates are scored as given: COOCO passes the long form
    ``"A photo depicts a/an {name}"`` (Hessel et al. prefix "A photo depicts").
    ``image_keys`` (optional) name the images' pixels so repeated images are encoded once.
    """
    candidates = texts(candidates, "candidates")
    n = same_length(images=_images(images), candidates=candidates)
    if n == 0:
        return []
    enc = encoder(model)
    cos = (enc.embed_images(images, keys=image_keys) * enc.embed_texts(candidates)).sum(-1)
    return [_clip_s(float(c)) for c in cos]


def ref_clip_components(
    images: Sequence[Image.Image],
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    model: str | None = None,
    image_keys: Sequence[Hashable] | None = None,
) -> RefClipParts:
    """CLIP-S, the best reference cosine and RefCLIP-S for each item (``image_keys``
    as in :func:`clip_score`)."""
    images = _images(images)
    candidates = texts(candidates, "candidates")
    references = reference_lists(references, "references", n=len(candidates))
    n = same_length(images=images, candidates=candidates, references=references)
    if n == 0:
        return RefClipParts([], [], [])
    enc = encoder(model)
    cand = enc.embed_texts(candidates)
    image_cos = (enc.embed_images(images, keys=image_keys) * cand).sum(-1)
    flat = [r for refs in references for r in refs]
    ref_emb = enc.embed_texts(flat)
    clip_s, ref_sim, ref_clip = [], [], []
    start = 0
    for i, refs in enumerate(references):
        best = float((ref_emb[start : start + len(refs)] @ cand[i]).max())
        start += len(refs)
        c = _clip_s(float(image_cos[i]))
        clip_s.append(c)
        ref_sim.append(best)
        ref_clip.append(_harmonic(c, max(best, 0.0)))
    return RefClipParts(clip_s, ref_sim, ref_clip)


def ref_clip_score(
    images: Sequence[Image.Image],
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    model: str | None = None,
    image_keys: Sequence[Hashable] | None = None,
) -> list[float]:
    """RefCLIP-S: harmonic mean of CLIP-S and ``max(max_r cos(candidate, r), 0)``;
    0 when either is <= 0 (Hessel et al. 2021, Eq. 2)."""
    return ref_clip_components(images, candidates, references, model, image_keys).ref_clip_score


def text_similarity(a: Sequence[str], b: Sequence[str], model: str | None = None) -> list[float]:
    """Cosine similarity of CLIP text embeddings for each pair ``(a[i], b[i])``."""
    a, b = texts(a, "a"), texts(b, "b")
    n = same_length(a=a, b=b)
    if n == 0:
        return []
    enc = encoder(model)
    return [float(x) for x in (enc.embed_texts(a) * enc.embed_texts(b)).sum(-1)]
