"""Importing lmms_scene, any of its modules or a task's utils loads no model and
touches no network."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, harness_env

pytestmark = pytest.mark.slow

PROBE = r"""
import importlib, json, pkgutil, socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(repr(args[:2]))
    raise OSError("network disabled by the import-hygiene test")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

import lmms_scene
light = sorted(m for m in ("torch", "transformers", "sentence_transformers", "datasets", "lmms_eval") if m in sys.modules)

loads = []
import transformers, sentence_transformers
orig = transformers.PreTrainedModel.from_pretrained.__func__
def spy(cls, *a, **k):
    loads.append(cls.__name__)
    return orig(cls, *a, **k)
transformers.PreTrainedModel.from_pretrained = classmethod(spy)
st_init = sentence_transformers.SentenceTransformer.__init__
def st_spy(self, *a, **k):
    loads.append("SentenceTransformer")
    return st_init(self, *a, **k)
sentence_transformers.SentenceTransformer.__init__ = st_spy

modules = []
for pkg in ("lmms_scene", "lmms_scene.tasks"):
    root = importlib.import_module(pkg)
    for info in pkgutil.walk_packages(root.__path__, pkg + "."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
        modules.append(info.name)

from lmms_scene.cache import loaded_keys
print(json.dumps({"light": light, "modules": modules, "attempts": attempts, "loads": loads, "cached": [repr(k) for k in loaded_keys()]}))
"""


def test_imports_load_no_model_and_touch_no_network():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=harness_env(), cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    # `import lmms_scene` alone is cheap: no torch, no harness.
    assert report["light"] == []
    assert "lmms_scene.cli" in report["modules"] and "lmms_scene.models.blind" in report["modules"]
    assert report["attempts"] == [], f"network touched at import: {report['attempts']}"
    assert report["loads"] == [], f"models loaded at import: {report['loads']}"
    assert report["cached"] == []
