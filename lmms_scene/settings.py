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
``LMMS_SCENE_BENCHMARKS``      benchmarks defined outside lmms-scene to register, ``module:attribute``
                               specs separated by ``,`` (:func:`lmms_scene.benchmarks.register`)
``RANK``, ``WORLD_SIZE``,      set by ``accelerate launch`` / ``torchrun``: this process's share
``LOCAL_RANK``                 of the work (:func:`process_group`)
=============================  =============================================================

:meth:`Settings.check` parses every one of them with its rule (``lmms-scene eval`` calls it
before the harness loads anything): a bad value is a :class:`SettingError` naming the
setting, the value and the rule.

>>> with override(clip_model="none"):
...     current().clip_model
'none'
"""

from __future__ import annotations

import contextlib
import math
import os
import re
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
BENCHMARKS_ENV = "LMMS_SCENE_BENCHMARKS"
#: the ``clip_model`` value that switches the CLIP metrics off
CLIP_DISABLED = "none"
#: the words an on/off setting takes
ON, OFF = ("1", "on", "yes", "true"), ("0", "off", "no", "false")
#: the keys of ``LMMS_SCENE_CESG`` (checked here; :func:`lmms_scene.metrics.cesg.score.parse_components` builds them)
CESG_KEYS = (
    "coref",
    "parser",
    "encoder",
    "lambda",
    "weights",
    "synonyms",
    "interactive",
    "soft",
    "extra",
    "verifier",
    "device",
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class SettingError(ValueError):
    """A setting whose value breaks its rule: the message names the setting, the value and the rule."""


def _bad(name: str, value: object, rule: str) -> SettingError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "...'"
    return SettingError(f"{name}={shown}: {rule}")


def parse_weights(text: str, name: str = "weights") -> tuple[tuple[float, float, float], str | None]:
    """``w_o,w_a,w_r`` as three finite numbers >= 0 with a positive sum, normalised to sum
    to 1; the second value is a note when they did not (None when they did).

    >>> parse_weights("0.5,0.25,0.25")
    ((0.5, 0.25, 0.25), None)
    >>> parse_weights("2,1,1")[0]
    (0.5, 0.25, 0.25)
    """
    parts = [p.strip() for p in str(text).split(",")]
    rule = "expected three finite numbers >= 0 (w_o,w_a,w_r) with a positive sum"
    try:
        weights = [float(p) for p in parts]
    except ValueError:
        raise _bad(name, text, rule) from None
    if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise _bad(name, text, rule)
    total = sum(weights)
    if abs(total - 1.0) <= 1e-9:
        return (weights[0], weights[1], weights[2]), None
    normal = tuple(w / total for w in weights)
    return normal, f"{name}={text!r} sum to {total:g}, not 1: normalised to {','.join(f'{w:g}' for w in normal)}"  # type: ignore[return-value]


def parse_unit(text: object, name: str) -> float:
    """A finite number in [0, 1] (a threshold such as CESG's lambda)."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _bad(name, text, "expected a number in [0, 1]") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise _bad(name, text, "expected a number in [0, 1]")
    return value


def parse_switch(text: str, name: str) -> bool:
    """An on/off setting: one of :data:`ON` or :data:`OFF` (any case)."""
    word = str(text).strip().lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    raise _bad(name, text, f"expected on or off ({'/'.join(ON)} or {'/'.join(OFF)})")


def check_device(value: str, name: str) -> str:
    """A torch device this machine has: ``cpu``, ``cuda`` or ``cuda:N`` with N below the
    number of CUDA devices torch sees, ``mps`` where torch has it."""
    text = str(value).strip()
    match = re.fullmatch(r"(cpu|cuda|mps)(?::(\d{1,4}))?", text)
    if not match or (match.group(1) != "cuda" and match.group(2) is not None):
        raise _bad(name, value, "expected cpu, cuda, cuda:N or mps")
    if match.group(1) == "cpu":
        return text
    import torch  # deferred: torch takes seconds to import and only a device other than the CPU needs it

    if match.group(1) == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise _bad(name, value, "this machine's torch has no MPS device")
        return text
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(match.group(2) or 0)
    if index >= count:
        seen = f"sees {count} CUDA device{'s' if count != 1 else ''}" + (
            f" (cuda:0 to cuda:{count - 1})" if count else ""
        )
        raise _bad(name, value, f"this machine's torch {seen}")
    return text


def check_text(value: str, name: str) -> str:
    """A name or path: not empty, no control characters (a newline would forge a log line)."""
    if not str(value).strip() or _CONTROL.search(str(value)):
        raise _bad(name, value, "expected a non-empty name or path without control characters")
    return str(value)


def cesg_fields(spec: str, name: str = CESG_ENV) -> dict[str, str]:
    """``LMMS_SCENE_CESG``'s ``key=value`` pairs, each key once and known, each value that
    has a rule here checked (lambda, weights, on/off, device); the judges of ``extra`` /
    ``verifier`` are checked where they are built (:func:`lmms_scene.judges.parse_judges`)."""
    out: dict[str, str] = {}
    for part in (spec or "").split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in CESG_KEYS:
            raise _bad(
                name, part.strip(), f"expected key=value pairs separated by ';' with key one of {', '.join(CESG_KEYS)}"
            )
        if key in out:
            raise _bad(name, part.strip(), f"{key} is given twice")
        where = f"{name} {key}"
        if key == "lambda":
            parse_unit(value, where)
        elif key == "weights":
            parse_weights(value, where)
        elif key in ("synonyms", "interactive", "soft"):
            parse_switch(value, where)
        elif key == "device":
            check_device(value, where)
        else:
            check_text(value, where)
        out[key] = value
    return out


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

    def check(self) -> list[str]:
        """Every setting parsed with its rule (``lmms-scene eval`` calls this before the
        harness loads anything): a bad value is a :class:`SettingError` naming the setting,
        the value and the rule; what was adjusted comes back as notes."""
        notes: list[str] = []
        check_text(self.clip_model, CLIP_MODEL_ENV)
        if self.device is not None:
            check_device(self.device, DEVICE_ENV)
        if self.cooco_clean not in ("skip", "include"):
            raise _bad(COOCO_CLEAN_ENV, self.cooco_clean, "expected skip or include")
        _ = self.journal_chunk_size
        fields_ = cesg_fields(self.cesg)
        if "weights" in fields_:
            note = parse_weights(fields_["weights"], f"{CESG_ENV} weights")[1]
            notes += [note] if note else []
        for name in (NO_PROGRESS_ENV, JOURNAL_ENV):  # read leniently by current(); a typo is refused here
            if os.environ.get(name, "").strip():
                parse_switch(os.environ[name], name)
        rank, world, _local = process_group()
        if not (world >= 1 and 0 <= rank < world):
            raise _bad("RANK", rank, f"expected 0 <= RANK < WORLD_SIZE ({world})")
        return notes

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
        journal=env.get(JOURNAL_ENV, "").strip().lower() not in OFF,
        journal_chunk=env.get(JOURNAL_CHUNK_ENV, ""),
    )
    with _lock:
        extra = dict(_overrides)
    if "clip_model" in extra:
        extra.setdefault("clip_model_explicit", True)
    return replace(base, **extra) if extra else base


def benchmark_plugins() -> list[str]:
    """The ``module:attribute`` specs in ``LMMS_SCENE_BENCHMARKS`` (empty when unset)."""
    return [s.strip() for s in os.environ.get(BENCHMARKS_ENV, "").split(",") if s.strip()]


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
