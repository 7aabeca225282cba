"""The one Jinja environment over ``templates/`` (installed as ``lmms_scene.templates``).

Templates are sandboxed (a dataset row can never reach Python internals through a
prompt) and strict: a variable the template uses but the caller did not pass is an
error, never an empty string in a prompt. Prompts and cards are text (no escaping);
pages (``*.html.jinja``: the report, the leaderboard) are HTML-escaped automatically.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from lmms_scene.cache import cached


def environment():
    def make():
        from jinja2 import FileSystemLoader, StrictUndefined, select_autoescape  # deferred: jinja2 is heavy to import
        from jinja2.sandbox import SandboxedEnvironment  # deferred: jinja2 is heavy to import

        root = resources.files("lmms_scene.templates")
        return SandboxedEnvironment(
            loader=FileSystemLoader(str(root)),
            undefined=StrictUndefined,
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=select_autoescape(enabled_extensions=("html.jinja",), default_for_string=False, default=False),
        )

    return cached(("jinja-environment",), make)


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a path relative to ``templates/``, e.g. ``"cooco/default.jinja"``).

    Trailing white space is stripped, so a template file may end with a newline.
    """
    return environment().get_template(template).render(**context).strip()


def available(folder: str) -> list[str]:
    """The template names under ``templates/<folder>/``, without the ``.jinja`` suffix."""
    root = resources.files("lmms_scene.templates").joinpath(folder)
    return sorted(p.name[: -len(".jinja")] for p in root.iterdir() if p.name.endswith(".jinja"))
