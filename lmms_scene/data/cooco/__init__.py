"""COOCO (Common Objects Out-of-Context; Merlo et al. 2025).

One module per responsibility:

- :mod:`~lmms_scene.data.cooco.schema`: conditions, vocabularies, the released columns,
  the authors' file names, ``features()``;
- :mod:`~lmms_scene.data.cooco.fields`: one source row's fields parsed strictly and
  converted (:func:`convert_row`), source columns mapped (:func:`map_columns`);
- :mod:`~lmms_scene.data.cooco.boxes`: target boxes (storage orders, :func:`box_problem`);
- :mod:`~lmms_scene.data.cooco.sources`: metadata files and image folders read, rows streamed;
- :mod:`~lmms_scene.data.cooco.builder`: the dataset from the hub release or a local
  folder (every row validated), the load-time re-check, and a locally built dataset's
  task files;
- :mod:`~lmms_scene.data.cooco.card`: the dataset card (``card``);
- :mod:`~lmms_scene.data.cooco.sample`: the embedded procedural sample;
- :mod:`~lmms_scene.data.cooco.views`: what the lmms-eval task needs from a row (padded
  and noisy images, the target crop, prompt coordinates, the document lists).

The names below are re-exported so ``from lmms_scene.data import cooco`` reaches them all.
Command line: ``lmms-scene build cooco`` (:mod:`lmms_scene.cli.cooco`).
"""

from lmms_scene.data.cooco.boxes import box_formats, box_problem
from lmms_scene.data.cooco.builder import (
    DATA_FILE,
    build,
    build_dataset,
    ensure_schema,
    evaluate_command,
    load_hub_rows,
    loaded_row_problem,
    local_task_configs,
    write_local,
)
from lmms_scene.data.cooco.card import CITATION, card
from lmms_scene.data.cooco.fields import convert_row, map_columns, size_warning
from lmms_scene.data.cooco.sample import SAMPLE_FILE, build_sample, sample_rows
from lmms_scene.data.cooco.schema import (
    AUTHORS_EXTRA_FIELDS,
    BOX_FORMATS,
    COLUMN_MAP,
    CONDITION_ALIASES,
    CONDITIONS,
    GENERATED_CONDITIONS,
    HUB_REPO,
    NAMING_CONDITIONS,
    NO_NOISE_AREA,
    NOISE_LEVELS,
    REQUIRED_FIELDS,
    SCENE_SPELLINGS,
    SCENES,
    SPLIT,
    TARGETS,
    CoocoBuildError,
    CoocoBuildWarning,
    canonical_condition,
    features,
    label_key,
    parse_filename,
    scene_spelling,
    to_xywh,
)
from lmms_scene.data.cooco.sources import folder_images, folder_rows, generate_rows, read_metadata
from lmms_scene.data.cooco.views import (
    KOSMOS_GRID,
    NOISE_AREAS,
    READINGS,
    authors_spelling,
    clean_option,
    doc_reading,
    gold_of,
    kosmos_patch_indices,
    naming_docs,
    naming_item,
    noise_grid_docs,
    noise_seed,
    padded,
    padded_geometry,
    prompt_context,
    reading_option,
    selection,
    target_crop,
    visual,
    warn_if_costly,
)

__all__ = [name for name in dir() if not name.startswith("_")]


def publish_build(out, *, folder=None, hub=None, metadata=None):
    """``lmms-scene publish cooco --from-folder DIR | --from-hub REPO``: build into ``out``."""
    if (folder is None) == (hub is None):
        raise ValueError("publish cooco: give one of --from-folder DIR, --from-hub REPO or --dataset D")
    dataset, label, notes = build(hub=hub, folder=folder, metadata=metadata)
    write_local(dataset, out, card(dataset, label, notes=notes), name="publish")
    return out, f"built by `lmms-scene publish cooco` from {label}"
