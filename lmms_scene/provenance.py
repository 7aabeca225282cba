"""What computed a score: every score lmms-scene writes carries one of these records,
so that two runs can be compared honestly.

One shape for every scorer: ``scorer`` (its name), ``checkpoint`` (model or parser that
computed it, or None), ``device``, ``thresholds``, ``versions`` (lmms-scene and the
libraries whose behaviour the numbers depend on), plus scorer-specific details.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lmms_scene import __version__


def library_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None when not installed)."""
    from importlib import metadata

    from lmms_scene.cache import memo

    def look_up() -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return memo("library-versions", name, look_up)


def scorer(
    name: str,
    *,
    checkpoint: str | None = None,
    device: str | None = None,
    thresholds: Mapping[str, Any] | None = None,
    libraries: Iterable[str] = (),
    **details: Any,
) -> dict[str, Any]:
    """A provenance record for a score.

    >>> record = scorer("refclipscore", checkpoint="openai/clip-vit-base-patch32", thresholds={"w": 2.5})
    >>> record["scorer"], record["checkpoint"], record["thresholds"]
    ('refclipscore', 'openai/clip-vit-base-patch32', {'w': 2.5})
    """
    versions = {"lmms-scene": __version__}
    versions.update({lib: library_version(lib) for lib in libraries})
    return {
        "scorer": name,
        "checkpoint": checkpoint,
        "device": device,
        "thresholds": dict(thresholds or {}),
        "versions": versions,
        "lmms_scene_version": __version__,
        **details,
    }
