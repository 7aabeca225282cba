"""What computed a score: every score lmms-scene writes carries one of these records,
so that two runs can be compared honestly.

One shape for every scorer: ``scorer`` (its name), ``checkpoint`` (model or parser that
computed it, or None), ``device``, ``thresholds``, ``versions`` (lmms-scene and the
libraries whose behaviour the numbers depend on), plus scorer-specific details.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from lmms_scene import __version__
from lmms_scene.cache import memo


def library_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None when not installed)."""

    def look_up() -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return memo("library-versions", name, look_up)


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def checkout_commit(package: str) -> str | None:
    """The git commit of ``package`` when it is imported from a git checkout of its own
    repository (``<top>/<package>/``), else None. A package installed into a virtualenv
    that happens to lie inside some other repository is not a checkout: asking git from
    the package folder would name that repository's commit (lmms-eval 0.7.3 does exactly
    this, recording the commit of whatever repository holds its site-packages)."""

    def look_up() -> str | None:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations))).resolve()
        top = _git(folder, "rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() / package != folder:
            return None
        commit = _git(folder, "rev-parse", "HEAD")
        dirty = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ".")
        return f"{commit}{'-dirty' if dirty else ''}" if commit else None

    return memo("checkout-commits", package, look_up)


def harness_version() -> str | None:
    """lmms-eval's version as installed (``importlib.metadata``), with its commit when the
    harness is a git checkout of lmms-eval: ``0.7.3`` or ``0.7.3+git.1a2b3c4d``."""
    version = library_version("lmms-eval")
    commit = checkout_commit("lmms_eval")
    if version and commit:
        return f"{version}+git.{commit[:8]}"
    return version


def run_versions() -> dict[str, Any]:
    """The versions a results file or a submission records: the harness and lmms-scene
    (each with its commit when it is a git checkout), and the libraries the numbers of
    every benchmark depend on."""
    return {
        "lmms_eval": library_version("lmms-eval"),
        "lmms_eval_commit": checkout_commit("lmms_eval"),
        "lmms_scene": __version__,
        "lmms_scene_commit": checkout_commit("lmms_scene"),
        **{lib: library_version(lib) for lib in ("torch", "transformers", "datasets")},
    }


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
