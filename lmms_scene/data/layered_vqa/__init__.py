"""Layered-VQA (Sai Teja et al., "Composition, Not Conversation").

One module per responsibility:

- :mod:`~lmms_scene.data.layered_vqa.schema`: the columns of a row, ``features()``,
  ``validate``, the facts about an item (layers, depth, supporting layers);
- :mod:`~lmms_scene.data.layered_vqa.schedules`: the one table of the 16 schedules
  (standard library only);
- :mod:`~lmms_scene.data.layered_vqa.delivery`: the schedules bound to the functions that
  build their turns (``SCHEDULES``), ``deliver``, ``Turn`` and ``View``;
- :mod:`~lmms_scene.data.layered_vqa.rounds`: the harness's multi-round wiring
  (``simple_round``, ``chat_messages``, ``KeepRepeats``, ``conversations``, ``MAX_ROUNDS``);
- :mod:`~lmms_scene.data.layered_vqa.views`: the task documents (``schedule_docs``, every
  row re-checked) and the shipped tasks' placeholder;
- :mod:`~lmms_scene.data.layered_vqa.builder`: the dataset from a local release or the
  generator, written as a local build with its tasks (``build_release``,
  ``build_synthetic``, ``write_local``, ``publish_build``); the registry's ``data_module``;
- :mod:`~lmms_scene.data.layered_vqa.card`: the dataset card;
- :mod:`~lmms_scene.data.layered_vqa.sample`: the embedded sample, ``toy_item``;
- :mod:`~lmms_scene.data.layered_vqa.synth`: the procedural scene generator.

Unlike ``lmms_scene.data.cooco``, this package re-exports nothing: the registry
(``lmms_scene.benchmarks``) imports :mod:`~lmms_scene.data.layered_vqa.schedules`, which
runs this file, and importing the registry must stay light (no numpy, no PIL) and below
the data modules (docs/architecture.md, "Floors"). Import the submodule that owns a name.
Command line: ``lmms-scene build layered-vqa`` / ``layered-synth``
(:mod:`lmms_scene.cli.layered_vqa`).
"""
