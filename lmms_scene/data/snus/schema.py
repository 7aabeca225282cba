"""SNUS's schema: where the release lives, its splits and fields, explicit ``datasets.Features``.

A SNUS row is one image with its negative caption (what safety-relevant things are
absent) and the structured missing information behind it (paper, "SNUS Dataset"):
missing objects, missing attributes (object, attribute) and missing relations
(subject, relation, object).

The public hub location is not known yet: :data:`HUB_REPO` (mirrored in
``tasks/snus/_default_template_yaml``, the one place a user edits) names where the
``snus`` task reads from.
"""

from __future__ import annotations

#: where the ``snus`` task reads the release (placeholder until the authors publish it)
HUB_REPO = "snus-benchmark/SNUS"
SPLITS = ("train", "validation", "test")
SAMPLE_FILE = "sample/snus_sample.parquet"
CARD_FILE = "README.md"
FIELDS = ("image_id", "image", "caption", "missing_objects", "missing_attributes", "missing_relations", "scene")


def features():
    """The explicit ``datasets.Features`` of a SNUS split."""
    from datasets import (
        Features,
        Image,
        Value,
    )  # deferred: datasets (pyarrow, pandas) is heavy to import
    from datasets import Sequence as Seq  # deferred: as above

    return Features(
        {
            "image_id": Value("string"),
            "image": Image(),
            "caption": Value("string"),
            "missing_objects": Seq(Value("string")),
            # lists of records (a list literal: Sequence(dict) would store a dict of lists)
            "missing_attributes": [{"object": Value("string"), "attribute": Value("string")}],
            "missing_relations": [{"subject": Value("string"), "relation": Value("string"), "object": Value("string")}],
            "scene": Value("string"),
        }
    )
