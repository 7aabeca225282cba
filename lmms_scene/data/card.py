"""The one card path: every dataset card lmms-scene writes (a build's ``README.md``, the
card ``publish`` pushes) has its YAML front matter written, and every card it reads has
it parsed, by ``huggingface_hub``'s :class:`~huggingface_hub.DatasetCardData` /
:class:`~huggingface_hub.DatasetCard`, never by hand.

Besides the hub's own keys (``license``, ``pretty_name``, ``task_categories``,
``configs``), a card lmms-scene writes records ``source`` (where the data came from) and
``license_terms`` (the license in words), which ``publish`` reads back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any


def front_matter(
    *,
    license: str,
    source: str,
    pretty_name: str,
    splits: Sequence[str],
    data_path: str = "data/{split}-*",
    task_categories: Sequence[str] = (),
    license_terms: str | None = None,
    **extra: Any,
) -> str:
    """The ``---``-fenced YAML block of a card (``data_path``: where a split's files are,
    ``{split}`` filled in)."""
    from huggingface_hub import DatasetCardData  # deferred: huggingface_hub is heavy to import

    data = DatasetCardData(
        license=license,
        pretty_name=pretty_name,
        task_categories=list(task_categories) or None,
        configs=[
            {"config_name": "default", "data_files": [{"split": s, "path": data_path.format(split=s)} for s in splits]}
        ],
        source=source,
        license_terms=license_terms,
        **extra,
    )
    return f"---\n{data.to_yaml()}\n---\n"


def card(body: str, **meta: Any) -> str:
    """A whole card: :func:`front_matter` of ``meta`` and ``body``."""
    return front_matter(**meta) + body.lstrip("\n")


def read_card(text: str) -> tuple[dict[str, Any], str]:
    """(front matter as a dict, body) of a card; ``({}, text)`` when it has none."""
    from huggingface_hub import DatasetCard  # deferred: huggingface_hub is heavy to import

    # huggingface_hub logs a warning for a card without metadata; that is a valid card here
    logger = logging.getLogger("huggingface_hub.repocard")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        parsed = DatasetCard(text)
    finally:
        logger.setLevel(level)
    data = parsed.data.to_dict() if parsed.data is not None else {}
    return {k: v for k, v in data.items() if v is not None}, parsed.text


def meta_of(built: Mapping[str, Any], key: str) -> str | None:
    value = built.get(key)
    return None if value in (None, "") else str(value)
