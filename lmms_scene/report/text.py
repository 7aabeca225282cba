"""The text ``lmms-scene show`` prints: every benchmark's :class:`~lmms_scene.report.tables.View`
(its registry results module's, the same objects the HTML report renders) as text, wide
tables cut into column blocks."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from lmms_scene.report.html import views
from lmms_scene.results import load


def show_text(paths: Sequence[str | Path], width: int | None = 160) -> tuple[str, int]:
    """The text ``show`` prints for ``paths`` and its exit status (2 when nothing was shown).

    Every benchmark's part is its registry results module's view (the same objects the
    HTML report renders); a mixture of datasets is stated first. No line is longer than
    ``width`` (None: as long as the tables are)."""
    loaded = load(paths)
    ours = [r for r in loaded.results if r.benchmark is not None]
    built, mixture = views(ours)
    parts: list[str] = []
    if mixture:
        parts.append(
            "\n".join(
                textwrap.fill("NOTE: " + m, width, subsequent_indent="  ") if width else "NOTE: " + m for m in mixture
            )
        )
    shown = 0
    for view in built:
        parts.append(f"# {view.title}\n\n{view.text(width)}")
        shown += bool(view.tables)
    others = sorted({r.task for r in loaded.results if r.benchmark is None})
    notes = []
    if others:
        notes.append(f"not lmms-scene tasks (not shown): {', '.join(others)}")
    notes += [f"skipped {path}: {why}" for path, why in loaded.skipped + [s for v in built for s in v.skipped]]
    if not shown:
        notes.insert(0, f"no lmms-scene results in {', '.join(map(str, paths))}")
    return "\n\n".join(parts + (["\n".join(notes)] if notes else [])), (0 if shown else 2)
