"""SNUS's metrics. CESG itself (construction, matching, the SNUS report and per-row scores)
is :mod:`lmms_scene.metrics.cesg`, which the ``evaluate`` modules and the caption scorers
use too; this package holds what is SNUS's alone:

- :mod:`~lmms_scene.metrics.snus.tables`: the results module (the registry's
  ``results_module``): identity, report, summary, failures, verification, ``view``.

Importing this package loads no model.
"""
