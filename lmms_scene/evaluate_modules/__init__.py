"""lmms-scene's metrics as Hugging Face ``evaluate`` modules (shipped as package data).

Each folder is what ``evaluate-cli create`` lays out: ``<name>.py`` (the
``evaluate.Metric``), ``README.md`` (its metric card), ``app.py`` (the Space widget) and
``requirements.txt``. Load one offline from its path::

    import evaluate
    from lmms_scene.evaluate_modules import path
    cesg = evaluate.load(str(path("cesg")))

Each module is a thin wrapper over the library function it names; nothing is computed
here (a test checks that each module gives the library's numbers).
"""

from __future__ import annotations

from pathlib import Path

#: the modules shipped here
NAMES = ("cesg", "refclipscore", "cooco_naming_accuracy")


def path(name: str) -> Path:
    """The folder of the module called ``name`` (pass it to ``evaluate.load``)."""
    if name not in NAMES:
        raise KeyError(f"unknown evaluate module {name!r}; lmms-scene ships {', '.join(NAMES)}")
    return Path(__file__).parent / name
