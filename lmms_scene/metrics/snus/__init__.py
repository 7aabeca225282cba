"""SNUS's metrics. CESG itself (construction, matching) is :mod:`lmms_scene.metrics.cesg`,
which the ``evaluate`` modules and the caption scorers use too; this package holds what is
SNUS's alone:

- :mod:`~lmms_scene.metrics.snus.scoring`: one scored row per image, ``prescore``, the SNUS
  report (CESG, the caption baselines, the AC stress test);
- :mod:`~lmms_scene.metrics.snus.tables`: the results module (the registry's
  ``results_module``): identity, report, summary, failures, verification, ``view``.

Importing this package loads no model.
"""
