"""Tasks re-check a dataset's rows when they load it, before the model runs.

A dataset a task reads (from the hub, or a folder someone built or edited) is checked
row by row against the benchmark's schema when the task is built (its ``process_docs``):
images decoded in full (:func:`lmms_scene.data.release.decode_image`), sizes, boxes,
layer indices and texts checked. A dataset whose *layout* is wrong (a missing column) is
an error before the model runs, as before. A bad *row* is not dropped and does not stop
the run: it is replaced by a **stand-in** row carrying the reason in the column
:data:`PROBLEM` (the doc stays, so nothing is silently lost and the row counts are the
release's), whose images are a small grey square that every view renders. The model
gets :data:`UNUSABLE_PROMPT` for it, and ``process_results`` records the row unscored
with the reason (``unscored_reason``), which the benchmark's report counts
(``n_unscored``) and lists. A dataset in which every row is bad is an error listing the
reasons.

Why keep the doc rather than drop it: the reason then travels with the run (in the
samples file, so ``rescore``, ``show`` and ``report`` see it), every aggregation keeps
counting the same documents, and a multi-process run needs no side channel. The price is
one short generation per bad row.

>>> problem_of({"lmms_scene_row_problem": "field 'width': 40 but the image is 60 wide"})
"field 'width': 40 but the image is 60 wide"
>>> problem_of({"image_id": "a"}) is None
True
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from lmms_scene import cache

#: the column that marks a stand-in row: "" for a good row, the reason for a bad one
PROBLEM = "lmms_scene_row_problem"
#: what the model is asked for a stand-in row (its answer is recorded, never scored)
UNUSABLE_PROMPT = (
    "This item of the benchmark could not be loaded (the run's report says why), so there is "
    "nothing to answer. Reply with an empty answer."
)
#: how many bad rows an error or a warning lists before "and N more"
LISTED = 10
#: the side of a stand-in's grey image
STAND_IN_SIDE = 32


def problem_of(doc: Any) -> str | None:
    """The reason a doc is a stand-in for a bad row, or None for a good row."""
    if not isinstance(doc, Mapping):
        return None
    value = doc.get(PROBLEM)
    return str(value) if value else None


def stand_in_image(mode: str = "RGB", size: tuple[int, int] = (STAND_IN_SIDE, STAND_IN_SIDE)) -> dict[str, Any]:
    """A grey PNG (an undecoded ``datasets`` Image cell) for a stand-in row."""
    colour = (128, 128, 128, 255) if mode == "RGBA" else (128, 128, 128)
    buffer = io.BytesIO()
    Image.new(mode, size, colour).save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def stand_in_visual():
    """The grey image a view shows when it cannot render a row (never reached for a
    checked dataset; a last guard so generation never raises)."""
    return Image.new("RGB", (STAND_IN_SIDE, STAND_IN_SIDE), (128, 128, 128))


def undecoded(dataset):
    """``dataset`` with every image column (``Image`` or a list of them) left undecoded
    (``{"bytes", "path"}``): the checks decode them strictly themselves."""
    from datasets import Image, List, Sequence  # deferred: datasets (pyarrow, pandas) is heavy to import

    features = dataset.features
    out = dataset
    for name, feature in features.items():
        if isinstance(feature, Image) and feature.decode:
            out = out.cast_column(name, Image(decode=False))
        elif isinstance(feature, (List, Sequence)) and isinstance(getattr(feature, "feature", None), Image):
            kind = type(feature)
            out = out.cast_column(name, kind(Image(decode=False)))
        elif isinstance(feature, list) and feature and isinstance(feature[0], Image):
            out = out.cast_column(name, [Image(decode=False)])
    return out


@functools.lru_cache(maxsize=1)
def _code() -> str:
    """A hash of every source file of lmms-scene: what a conversion's result depends on
    besides its input and arguments."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def map_fingerprint(dataset, step: str, *parts: Any) -> str | None:
    """The ``new_fingerprint`` for ``dataset.map(fn, ...)`` (the name ``datasets`` caches
    the result under), computed from what the result depends on: the input's fingerprint,
    ``step``, ``parts`` (JSON-written) and lmms-scene's code.

    Left to itself, ``datasets`` fingerprints ``fn`` by pickling it with dill, following
    its globals into every module they reach, :mod:`lmms_scene.cache` and the models it
    holds included: once spaCy, WordNet and a sentence encoder were loaded in the process,
    fingerprinting COOCO's one-row conversion took 27 s under a profiler (the conversion now
    takes 0.2 s there; before those loads, datasets' own fingerprint is quick).
    None when the input has no fingerprint (``datasets`` then computes its own)."""
    base = getattr(dataset, "_fingerprint", None)
    if not base:
        return None
    h = hashlib.sha256()
    for part in (base, step, _code(), json.dumps(parts, sort_keys=True, default=str)):
        h.update(str(part).encode() + b"\0")
    return h.hexdigest()[:32]


def listed(problems: Mapping[int, str], limit: int = LISTED) -> str:
    items = [problems[k] for k in sorted(problems)]
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def find_problems(dataset, check: Callable[[Mapping[str, Any], int], str | None]) -> dict[int, str]:
    """Row index -> the reason ``check(row, index)`` gives (None: a good row), over the
    undecoded rows of ``dataset``; a check that raises is the reason itself."""
    view = undecoded(dataset)
    problems: dict[int, str] = {}
    for index, row in enumerate(view):
        try:
            reason = check(row, index)
        except Exception as exc:  # the check's own failure names the row through its message
            reason = f"row {index}: {type(exc).__name__}: {exc}"
        if reason:
            problems[index] = str(reason)
    return problems


def replace_rows(dataset, stand_ins: Mapping[int, Mapping[str, Any]], problems: Mapping[int, str]):
    """``dataset`` with a :data:`PROBLEM` column ("" for every good row) and the rows in
    ``stand_ins`` replaced by those stand-ins, in place (row order kept). The good rows
    are not copied: the result concatenates slices of ``dataset`` with the stand-ins."""
    from datasets import Dataset, Value, concatenate_datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

    n = len(dataset)
    if dataset._indices is not None:
        dataset = dataset.flatten_indices()
    full = dataset.add_column(PROBLEM, [""] * n, feature=Value("string"))
    order = sorted(stand_ins)
    columns = full.column_names
    # a column the stand-in does not fill (one the benchmark does not read) is left empty
    rows = [
        {**dict.fromkeys(columns), **{k: v for k, v in stand_ins[i].items() if k in columns}, PROBLEM: problems[i]}
        for i in order
    ]
    replacements = Dataset.from_list(rows, features=full.features)
    pieces, previous = [], 0
    for k, index in enumerate(order):
        if index > previous:
            pieces.append(full.select(range(previous, index)))
        pieces.append(replacements.select(range(k, k + 1)))
        previous = index + 1
    if previous < n:
        pieces.append(full.select(range(previous, n)))
    return concatenate_datasets(pieces)


def screen(
    dataset,
    check: Callable[[Mapping[str, Any], int], str | None],
    stand_in: Callable[[Mapping[str, Any], int], Mapping[str, Any]],
    *,
    what: str,
    error: type[Exception] = ValueError,
    memo_key: Any = None,
):
    """Check every row of ``dataset`` (:func:`find_problems`) and replace each bad one by
    ``stand_in(row, index)`` (:func:`replace_rows`). ``dataset`` itself is returned when
    every row is good. Every row bad is ``error`` listing the reasons (``what`` names the
    dataset). The check's result is memoised under ``memo_key`` (e.g. the dataset's
    fingerprint), so two tasks on one dataset check it once."""
    if memo_key is not None and not (isinstance(memo_key, tuple) and None in memo_key):
        problems = cache.memo("recheck", memo_key, lambda: find_problems(dataset, check))
    else:
        problems = find_problems(dataset, check)
    if not problems:
        return dataset
    if len(problems) == len(dataset):
        raise error(
            f"{what}: nothing to evaluate: all {len(dataset)} rows failed the check when the task loaded them: {listed(problems)}"
        )
    _warn(what, problems, len(dataset))
    view = undecoded(dataset)
    stand_ins = {i: stand_in(view[i], i) for i in problems}
    return replace_rows(dataset, stand_ins, problems)


def _warn(what: str, problems: Mapping[int, str], n: int) -> None:
    message = (
        f"lmms-scene: {what}: {len(problems)} of {n} rows failed the check when the task loaded them; "
        f"each is kept as a stand-in and recorded unscored with its reason: {listed(problems)}"
    )
    try:
        from loguru import logger  # deferred: loguru is heavy to import

        logger.warning(message)
    except Exception:  # pragma: no cover - loguru comes with the harness
        pass

    warnings.warn(message, UserWarning, stacklevel=3)


def text(value: Any) -> str:
    """A stand-in's copy of a text field: the value when it is a string, else ""."""
    return value if isinstance(value, str) else ""
