"""Pfram's label and description files under the bad input of issue 16 (the other probes
are in tests/test_pfram_bad_input.py): a key repeated in one JSON object is an error
naming it, never the last value kept silently. Rows of docs/reliability.md ("Pfram")."""

from __future__ import annotations

import pytest

from lmms_scene.analysis import labels


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"a.jpg": ["cat", "sofa"], "b.jpg": ["dog"], "a.jpg": ["car"]}', "a.jpg"),
        ('[{"id": 1, "type": "generative", "truth": ["cat"], "truth": ["dog", "car", "bus", "cup", "pen"]}]', "truth"),
        (
            '{"images": [{"id": 1, "file_name": "a.jpg", "file_name": "b.jpg"}], "annotations": [], "categories": []}',
            "file_name",
        ),
    ],
    ids=["label-map", "amber-record", "coco-image"],
)
def test_a_repeated_key_is_an_error_naming_it(tmp_path, text, key):
    path = tmp_path / "labels.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"labels.json: key '{key}' appears more than once in one JSON object"):
        labels.read_labels(path)


def test_a_descriptions_file_with_a_repeated_image_is_an_error_naming_it(tmp_path):
    # what `pfram score --descriptions` reads (G_des): the same reader
    path = tmp_path / "descriptions.json"
    path.write_text('{"a.jpg": "A cat on a sofa.", "a.jpg": "A dog."}')
    with pytest.raises(ValueError, match=r"descriptions.json: key 'a.jpg' appears more than once"):
        labels.read_json(path, "--descriptions file")


def test_distinct_keys_still_read():
    import json
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "labels.json"
    path.write_text(json.dumps({"a.jpg": ["cat", "sofa"], "b.jpg": ["dog"]}))
    assert labels.read_labels(path) == {"a.jpg": frozenset({"cat", "sofa"}), "b.jpg": frozenset({"dog"})}
