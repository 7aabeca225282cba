"""Reports over lmms-eval results: the self-contained HTML report (:mod:`.html`), its
tables (:mod:`.tables`) and plots (:mod:`.plots`); leaderboard submissions
(:mod:`.submission`, with ``submission.schema.json``) and the leaderboard
(:mod:`.leaderboard`); dataset publishing (:mod:`.publish`).

Importing this package loads neither matplotlib nor any model; the heavy imports live
inside the functions that draw.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ReportInfo", "build_report"]


def __getattr__(name: str) -> Any:
    # lazy, so `import lmms_scene.report.submission` does not pull the HTML code in
    if name in __all__:
        from lmms_scene.report import html

        return getattr(html, name)
    raise AttributeError(f"module 'lmms_scene.report' has no attribute {name!r}")
