"""Reports over lmms-eval results: the self-contained HTML report (:mod:`.html`), its
tables (:mod:`.tables`) and plots (:mod:`.plots`); leaderboard submissions
(:mod:`.submission`, with ``submission.schema.json``) and the leaderboard
(:mod:`.leaderboard`); dataset publishing (:mod:`.publish`).

Importing this package loads neither matplotlib nor any model; the heavy imports live
inside the functions that draw. It re-exports nothing (its modules import each other:
``from lmms_scene.report.html import build_report``).
"""
