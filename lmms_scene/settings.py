"""The one place that reads lmms-scene's configuration.

Configuration comes from the environment (so it reaches every process of an
``accelerate launch`` run) and from in-process overrides (:func:`override`, used by the
demo and by tests). Library code never reads or writes ``os.environ`` itself: callers
take :func:`current` once and pass its values down as arguments.

=============================  =============================================================
``LMMS_SCENE_CLIP_MODEL``      CLIP checkpoint (hub name or local folder) for COOCO's metrics;
                               ``none`` switches those metrics off (recorded as not computed)
``LMMS_SCENE_DEVICE``          device for the metric models (default: CUDA when present, else CPU)
``LMMS_SCENE_NO_TASK_HOOK``    any value: do not add our task folder to the harness's index
``LMMS_SCENE_NO_PROGRESS``     ``1``: no progress bars on long steps
``LMMS_SCENE_COOCO_CLEAN``     ``include``: the COOCO tasks also evaluate the clean images
                               (target removed; default ``skip``, as the authors' evaluation)
``LMMS_SCENE_COOCO_READING``   ``authors``: COOCO scores the authors' inputs (their text handling,
                               row selection, JPEG crop, gold spellings; docs/cooco.md);
                               default ``cleaned``; ``authors`` requires clean images skipped
``LMMS_SCENE_CESG``            SNUS's CESG components for the harness task, ``key=value`` pairs
                               separated by ``;`` (coref, parser, encoder, lambda, weights,
                               synonyms, extra, verifier; see docs/snus.md); unset: offline defaults
``LMMS_SCENE_JOURNAL``         ``off``: ``lmms-scene eval`` keeps no generation journal
                               (:mod:`lmms_scene.journal`; default on)
``LMMS_SCENE_JOURNAL_CHUNK``   requests per model call while journaling (default 32)
``RANK``, ``WORLD_SIZE``,      set by ``accelerate launch`` / ``torchrun``: this process's share
``LOCAL_RANK``                 of the work (:func:`process_group`)
=============================  =============================================================

>>> with override(clip_model="none"):
...     current().clip_model
'none'
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace

DEFAULT_CLIP_MODEL = "openai/clip-vit-base-patch32"
CLIP_MODEL_ENV = "LMMS_SCENE_CLIP_MODEL"
DEVICE_ENV = "LMMS_SCENE_DEVICE"
NO_TASK_HOOK_ENV = "LMMS_SCENE_NO_TASK_HOOK"
NO_PROGRESS_ENV = "LMMS_SCENE_NO_PROGRESS"
COOCO_CLEAN_ENV = "LMMS_SCENE_COOCO_CLEAN"
COOCO_READING_ENV = "LMMS_SCENE_COOCO_READING"
CESG_ENV = "LMMS_SCENE_CESG"
JOURNAL_ENV = "LMMS_SCENE_JOURNAL"
JOURNAL_CHUNK_ENV = "LMMS_SCENE_JOURNAL_CHUNK"
#: the ``clip_model`` value that switches the CLIP metrics off
CLIP_DISABLED = "none"


@dataclass(frozen=True)
class Settings:
    #: CLIP checkpoint for COOCO's metrics, or ``none``
    clip_model: str = DEFAULT_CLIP_MODEL
    #: whether ``clip_model`` was chosen explicitly (environment or override), not defaulted
    clip_model_explicit: bool = False
    #: device for metric models; None: CUDA when present, else CPU
    device: str | None = None
    no_task_hook: bool = False
    #: progress bars on long steps (``LMMS_SCENE_NO_PROGRESS=1`` switches them off)
    progress: bool = True
    #: COOCO's clean images (target removed): ``skip`` (default) or ``include``; the
    #: COOCO tasks check the value (:func:`lmms_scene.data.cooco.views.clean_option`)
    cooco_clean: str = "skip"
    #: COOCO's reading: ``cleaned`` (default) or ``authors``; the COOCO tasks check the
    #: value (:func:`lmms_scene.data.cooco.views.reading_option`)
    cooco_reading: str = "cleaned"
    #: SNUS's CESG components (``LMMS_SCENE_CESG``; "" = the offline defaults)
    cesg: str = ""
    #: ``lmms-scene eval`` journals generations as they arrive (``LMMS_SCENE_JOURNAL=off``: no)
    journal: bool = True
    #: requests per model call while journaling, as given (``LMMS_SCENE_JOURNAL_CHUNK``;
    #: checked by :attr:`journal_chunk_size` when a journal starts)
    journal_chunk: str = ""

    @property
    def journal_chunk_size(self) -> int:
        """``journal_chunk`` as a positive integer (default 32); a bad value is an error naming it."""
        value = str(self.journal_chunk).strip()
        if not value:
            return 32
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number < 1:
            raise ValueError(f"{JOURNAL_CHUNK_ENV}: expected a positive integer, got {self.journal_chunk!r}")
        return number

    @property
    def clip_enabled(self) -> bool:
        return self.clip_model.strip().lower() != CLIP_DISABLED


_overrides: dict[str, object] = {}
_lock = threading.Lock()


def current() -> Settings:
    """The settings in force now: overrides, else the environment, else the defaults."""
    env = os.environ
    clip = env.get(CLIP_MODEL_ENV) or None
    base = Settings(
        clip_model=clip or DEFAULT_CLIP_MODEL,
        clip_model_explicit=clip is not None,
        device=env.get(DEVICE_ENV) or None,
        no_task_hook=bool(env.get(NO_TASK_HOOK_ENV)),
        progress=env.get(NO_PROGRESS_ENV, "").strip() in ("", "0"),
        cooco_clean=env.get(COOCO_CLEAN_ENV, "").strip() or "skip",
        cooco_reading=env.get(COOCO_READING_ENV, "").strip() or "cleaned",
        cesg=env.get(CESG_ENV, "").strip(),
        journal=env.get(JOURNAL_ENV, "").strip().lower() not in ("off", "0", "no", "false"),
        journal_chunk=env.get(JOURNAL_CHUNK_ENV, ""),
    )
    with _lock:
        extra = dict(_overrides)
    if "clip_model" in extra:
        extra.setdefault("clip_model_explicit", True)
    return replace(base, **extra) if extra else base


def process_group() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` of this process under ``accelerate launch`` /
    ``torchrun`` (their ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); ``(0, 1, 0)`` alone."""
    env = os.environ
    try:
        rank, world = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers ({exc})") from None
    return rank, world, local


@contextlib.contextmanager
def override(**values: object) -> Iterator[Settings]:
    """Set settings in this process for the duration of a ``with`` block."""
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TypeError(f"override: unknown settings {unknown}; known: {sorted(known)}")
    with _lock:
        saved = dict(_overrides)
        _overrides.update(values)
    try:
        yield current()
    finally:
        with _lock:
            _overrides.clear()
            _overrides.update(saved)
