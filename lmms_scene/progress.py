"""Progress bars for the steps that can take minutes (dataset building, CESG scoring of
a corpus, Pfram extraction and scoring, report building): tqdm, as the harness uses,
on standard error. ``LMMS_SCENE_NO_PROGRESS=1`` (read by :mod:`lmms_scene.settings`)
switches them off.

>>> list(progress(range(3), "counting", enabled=False))
[0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from lmms_scene import settings

T = TypeVar("T")


def progress(
    items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it", enabled: bool | None = None
) -> Iterator[T]:
    """``items`` with a tqdm bar named ``desc`` (off when disabled in the settings)."""
    if enabled is None:
        enabled = settings.current().progress
    if not enabled:
        yield from items
        return
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    yield from tqdm(items, desc=desc, total=total, unit=unit, leave=False)
