"""lmms-scene's harness models, registered through lmms-eval's ``lmms_eval.models``
entry-point group (see ``pyproject.toml``): ``echo`` and ``scene_blind``, each with a
simple and a chat class, and ``scene_replay`` (wraps any model for multi-round tasks). Importing this module loads no model."""

from __future__ import annotations

from lmms_scene import compat, harness, preflight
from lmms_scene.registration import install_version_fix

MODELS = {
    "echo": ("lmms_scene.models.echo.Echo", "lmms_scene.models.echo.EchoChat"),
    "scene_blind": ("lmms_scene.models.blind.SceneBlind", "lmms_scene.models.blind.SceneBlindChat"),
    # multi-round tasks for any harness model, one request per turn (simple class only)
    "scene_replay": ("lmms_scene.models.replay.SceneReplay", None),
    # a saved run's answers, replayed to recompute its metrics (lmms-scene rescore)
    "scene_from_samples": ("lmms_scene.models.from_samples.SceneFromSamples", None),
}


def MANIFESTS():
    """Entry-point payload: the model manifests. Loading it also registers our task
    folder with the harness (route 3 in :mod:`lmms_scene.registration`)."""
    install_version_fix()  # whatever LMMS_SCENE_NO_TASK_HOOK says: the results' versions must be true
    if harness.install():
        preflight.install()  # the plain route's pre-flight: every requested task checked before the model loads
    return [compat.model_manifest(name, simple, chat) for name, (simple, chat) in MODELS.items()]
