"""SNUS (Jiang et al., "Benchmarking MLLMs via Cognitive Expected Scene Graph for
Safety-Critical Visual Negation Understanding").

One module per responsibility, as :mod:`lmms_scene.data.cooco`:

- :mod:`~lmms_scene.data.snus.schema`: the hub location, splits, fields, ``features()``;
- :mod:`~lmms_scene.data.snus.builder`: the dataset from a local release (every record
  checked), written as a local build (:mod:`lmms_scene.data.local`) with the task that
  evaluates its test split; the load-time check of a dataset the task reads;
- :mod:`~lmms_scene.data.snus.card`: the dataset card;
- :mod:`~lmms_scene.data.snus.sample`: the embedded procedural sample;
- :mod:`~lmms_scene.data.snus.views`: what the blind prior reads from the captions.

The names below are re-exported so ``from lmms_scene.data import snus`` reaches them all.
Command line: ``lmms-scene build snus`` (:mod:`lmms_scene.cli.snus`).
"""

from lmms_scene.data.snus.builder import (
    LOCAL_BASES,
    build,
    convert_row,
    ensure_schema,
    evaluate_command,
    loaded_row_problem,
    local_task_configs,
    publish_build,
    read_metadata,
    tasks_folder,
    write_local,
)
from lmms_scene.data.snus.card import card
from lmms_scene.data.snus.sample import build_sample, sample_rows
from lmms_scene.data.snus.schema import CARD_FILE, FIELDS, HUB_REPO, SAMPLE_FILE, SPLITS, features
from lmms_scene.data.snus.views import negative_statements

__all__ = [name for name in dir() if not name.startswith("_")]
