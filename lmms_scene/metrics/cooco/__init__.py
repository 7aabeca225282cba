"""COOCO's metrics, one module per responsibility:

- :mod:`~lmms_scene.metrics.cooco.scoring`: normalisation, one scored row per image,
  ``prescore``, the COOCO breakdown and its Figure 3-4 tables;
- :mod:`~lmms_scene.metrics.cooco.tables`: the results module (the registry's
  ``results_module``): identity, report, summary, failures, verification, ``view``.

Importing this package loads no model.
"""
