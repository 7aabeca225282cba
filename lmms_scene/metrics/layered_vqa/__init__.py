"""Layered-VQA's metrics, one module per responsibility:

- :mod:`~lmms_scene.metrics.layered_vqa.grader`: the rule grader (typed answer extraction,
  negation, ``cannot_tell``), reading replies with the shared readers of
  :mod:`lmms_scene.metrics.answers`;
- :mod:`~lmms_scene.metrics.layered_vqa.grader_io`: answers files read, checked and
  graded (``lmms-scene layered-vqa grade``);
- :mod:`~lmms_scene.metrics.layered_vqa.scoring`: one scored row per (scene, question,
  schedule, repeat): grade, evidence selection, grounding;
- :mod:`~lmms_scene.metrics.layered_vqa.aggregation`: retained accuracy (the headline),
  the breakdowns, :func:`~lmms_scene.metrics.layered_vqa.aggregation.report`;
- :mod:`~lmms_scene.metrics.layered_vqa.judging`: the LLM-judge path after a run;
- :mod:`~lmms_scene.metrics.layered_vqa.tables`: the results module (the registry's
  ``results_module``): identity, report, summary, failures, verification, ``view``.

Importing this package loads no model.
"""
