"""The COOCO builder under bad input (issue 11, builder half): every probe builds its own
input and checks that it now gets a clear error naming the file, row, field and value
(``CoocoBuildError``; ``lmms-scene build cooco: error: ...`` with exit 2 on the command
line), or the right value."""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import fixture_dir
from PIL import Image, ImageFile

from lmms_scene import cli
from lmms_scene.data import cooco
from lmms_scene.data.cooco.fields import size_warning
from lmms_scene.data.cooco.schema import CoocoBuildWarning

ORIGINAL = "000000000011_kitchen_cup_original.jpg"
LOW = "000000000011_kitchen_cup_ham_relscore_low.jpg"
HIGH = "000000000011_kitchen_cup_bowl_relscore_high.jpg"
CLEAN = "000000000011_kitchen_cup_clean.jpg"


def record(name: str, **overrides) -> dict:
    """A metadata row that agrees with the authors' file name ``name``."""
    parsed = cooco.parse_filename(name)
    row = {
        "file_name": name,
        "scene": parsed["scene"],
        "target": parsed["target"],
        "swapped_object": parsed["swapped_object"],
        "target_bbox": "[5, 5, 10, 8]",
        "rel_level": parsed["rel_level"],
        "rel_score": "0.1" if parsed["swapped_object"] else "",
        "excluded": "False",
    }
    row.update(overrides)
    return row


def write_jpeg(path: Path, size=(40, 30), noisy: bool = False) -> bytes:
    if noisy:  # noise does not compress: a JPEG of some size to cut short
        pixels = np.random.default_rng(0).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
    else:
        image = Image.new("RGB", size, (10, 200, 30))
    image.save(path, format="JPEG", quality=90)
    return path.read_bytes()


def make_folder(tmp_path: Path, records, fmt: str = "csv", images=None, name: str = "cooco") -> Path:
    """A release folder: an image per record (unless ``images`` lists which) and the metadata."""
    folder = tmp_path / name
    folder.mkdir()
    for r in records if images is None else [{"file_name": n} for n in images]:
        write_jpeg(folder / r["file_name"])
    if fmt == "csv":
        with (folder / "metadata.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    else:
        (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return folder


def build(folder: Path, notes=None, **kw):
    rows, columns = cooco.folder_rows(folder)
    return cooco.build_dataset(rows, columns, base=folder, notes=notes, **kw)


# -- defect 2: file name and metadata disagree ------------------------------------------


@pytest.mark.parametrize(
    "name, field, value, shown, from_file",
    [
        (ORIGINAL, "target", "toilet", "target", "cup"),
        (HIGH, "swapped_object", "plate", "swapped_object (replacement)", "bowl"),
        (ORIGINAL, "scene", "bathroom", "scene", "kitchen"),
        (LOW, "rel_level", "relscore_high", "condition", "relscore_low"),
    ],
)
def test_file_name_and_metadata_must_agree(tmp_path, name, field, value, shown, from_file):
    folder = make_folder(tmp_path, [record(CLEAN), record(name, **{field: value})])
    with pytest.raises(
        cooco.CoocoBuildError,
        match=rf"row 1 \({name}\): {re.escape(shown)} '{value}' in the metadata contradicts the file name's '{from_file}' "
        rf"\(file {folder / name}\).*--prefer-metadata",
    ):
        build(folder)
    # on request the metadata's value wins, and the card says so
    notes: list[str] = []
    ds = build(folder, notes=notes, prefer_metadata=True)
    stored = {"swapped_object": "gold_label", "rel_level": "rel_level"}.get(field, field)
    assert ds[1][stored] == value
    assert notes == [f"row 1 ({name}): {shown} '{value}' taken from the metadata; the file name says '{from_file}'"]
    assert notes[0] in cooco.card(ds, "here", notes=notes)


def test_agreement_is_up_to_case_and_underscores(tmp_path):
    folder = make_folder(
        tmp_path,
        [
            record(
                "000000000011_living_room_potted_plant_relscore_low.jpg",
                scene="Living Room",
                target="potted plant",
                swapped_object="ham",
            )
        ],
    )
    notes: list[str] = []
    ds = build(folder, notes=notes)
    assert ds[0]["gold_label"] == "ham" and ds[0]["target"] == "potted plant" and notes == []


# -- defect 3: truncated or corrupt images ----------------------------------------------


def test_truncated_jpeg_is_an_error_naming_the_file_even_with_truncated_loading_on(tmp_path, monkeypatch):
    folder = make_folder(tmp_path, [record(CLEAN), record(ORIGINAL)], images=[CLEAN])
    whole = write_jpeg(folder / ORIGINAL, size=(160, 120), noisy=True)
    assert len(whole) > 8000
    (folder / ORIGINAL).write_bytes(whole[:2048])
    # what lmms-eval does at import; PIL then decodes the cut file as grey without a word
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    with Image.open(folder / ORIGINAL) as lenient:
        lenient.load()
    with pytest.raises(
        cooco.CoocoBuildError, match=rf"row 1 \({ORIGINAL}\): image .*{ORIGINAL} cannot be decoded in full .*truncated"
    ):
        build(folder)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # restored for whoever set it


def test_truncated_real_coco_image_is_an_error(tmp_path):
    source = fixture_dir("tiny_coco", "val2017", "000000037777.jpg")
    folder = make_folder(tmp_path, [record(CLEAN), record(ORIGINAL)], images=[CLEAN])
    (folder / ORIGINAL).write_bytes(source.read_bytes()[:2048])
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 1 \({ORIGINAL}\): .*cannot be decoded in full"):
        build(folder)
    # the whole file builds, with its real size
    (folder / ORIGINAL).write_bytes(source.read_bytes())
    ds = build(folder)
    with Image.open(source) as real:
        assert (ds[1]["width"], ds[1]["height"]) == real.size


def test_a_file_that_is_not_an_image_is_an_error(tmp_path):
    folder = make_folder(tmp_path, [record(CLEAN), record(ORIGINAL)], images=[CLEAN])
    (folder / ORIGINAL).write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 1 \({ORIGINAL}\): image .* cannot be decoded in full"):
        build(folder)


def test_truncated_hub_image_bytes_are_an_error_in_ensure_schema():
    from datasets import Dataset

    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(buffer, "JPEG")
    hub = Dataset.from_list(
        [
            {
                "image": {"bytes": buffer.getvalue()[:2048], "path": LOW},
                "scene": "kitchen",
                "target": "cup",
                "swapped_object": "ham",
                "target_bbox": [5.0, 5.0, 10.0, 8.0],
                "rel_level": "relscore_low",
            }
        ]
    )
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 0 \({LOW}\): image {LOW} cannot be decoded in full"):
        cooco.ensure_schema(hub)


# -- defect 4: booleans ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("1.0", True),
        ("yes", True),
        ("Yes", True),
        (" True ", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("0.0", False),
        ("no", False),
        ("NO", False),
        ("", False),
    ],
)
def test_excluded_accepts_the_boolean_spellings(tmp_path, value, expected):
    ds = build(make_folder(tmp_path, [record(CLEAN, excluded=value), record(ORIGINAL)]))
    assert ds["excluded"] == [expected, False]


@pytest.mark.parametrize(
    "value, expected", [(1.0, True), (0.0, False), (1, True), (0, False), (True, True), (None, False)]
)
def test_excluded_typed_values_in_jsonl(tmp_path, value, expected):
    ds = build(make_folder(tmp_path, [record(CLEAN, excluded=value), record(ORIGINAL)], fmt="jsonl"))
    assert ds["excluded"] == [expected, False]


@pytest.mark.parametrize("value", ["x", "y", "2", "maybe", "excluded", "-1"])
def test_excluded_rejects_anything_else_naming_row_and_value(tmp_path, value):
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 1 \({ORIGINAL}\): excluded: '{value}' is not a boolean"):
        build(make_folder(tmp_path, [record(CLEAN), record(ORIGINAL, excluded=value)]))


def test_excluded_rejects_other_numbers_in_jsonl(tmp_path):
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 0 \({ORIGINAL}\): excluded: 2 is not a boolean"):
        build(make_folder(tmp_path, [record(ORIGINAL, excluded=2)], fmt="jsonl"))


# -- defect 5: images and metadata rows must match ------------------------------------------


def test_image_without_a_metadata_row_is_an_error_or_skipped_and_listed(tmp_path):
    folder = make_folder(tmp_path, [record(ORIGINAL), record(LOW)])
    write_jpeg(folder / CLEAN)
    (folder / "more").mkdir()
    write_jpeg(folder / "more" / "stray.PNG")
    (folder / ".thumbs").mkdir()
    write_jpeg(folder / ".thumbs" / "hidden.jpg")  # hidden folders are not part of the release
    with pytest.raises(
        cooco.CoocoBuildError,
        match=rf"2 images in {folder} without a metadata row: {CLEAN}; more/stray.PNG\..*--skip-unmatched",
    ):
        build(folder)
    notes: list[str] = []
    ds = build(folder, notes=notes, skip_unmatched=True)
    assert ds["image_id"] == [Path(ORIGINAL).stem, Path(LOW).stem]
    assert notes == [
        f"skipped (image without a metadata row): {CLEAN}",
        "skipped (image without a metadata row): more/stray.PNG",
    ]
    card = cooco.card(ds, str(folder), notes=notes)
    assert "## Build notes" in card and f"- skipped (image without a metadata row): {CLEAN}" in card


def test_metadata_row_without_an_image_is_an_error_or_skipped_and_listed(tmp_path):
    folder = make_folder(tmp_path, [record(ORIGINAL), record(LOW), record(CLEAN)], images=[ORIGINAL, CLEAN])
    with pytest.raises(
        cooco.CoocoBuildError,
        match=rf"1 metadata rows without an image: row 1 \({LOW}\): image file not found: .*{LOW}",
    ):
        build(folder)
    notes: list[str] = []
    ds = build(folder, notes=notes, skip_unmatched=True)
    assert ds["image_id"] == [Path(ORIGINAL).stem, Path(CLEAN).stem]
    assert len(notes) == 1 and notes[0].startswith(f"skipped (metadata row without an image): row 1 ({LOW})")


def test_row_positions_survive_skipping(tmp_path):
    folder = make_folder(
        tmp_path, [record(ORIGINAL), record(LOW), record(CLEAN, excluded="x")], images=[ORIGINAL, CLEAN]
    )
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 2 \({CLEAN}\): excluded: 'x'"):
        build(folder, skip_unmatched=True)


# -- defect 7: numbers, boxes, metadata files --------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("rel_score", "high", r"rel_score: 'high' is not a number"),
        ("rel_score", "inf", r"rel_score: 'inf' is not a finite number"),
        ("target_bbox", "abc", r"target_bbox: 'abc' is not 4 numbers \[x, y, w, h\]"),
        ("target_bbox", "[5, 5, ten, 8]", r"target_bbox: '\[5, 5, ten, 8\]' is not 4 numbers"),
        ("target_bbox", "[5, 5, 10]", r"target_bbox: '\[5, 5, 10\]' needs 4 numbers \(x, y, w, h\), got 3"),
        ("target_bbox", "[5, 5, nan, 8]", r"target_bbox: '\[5, 5, nan, 8\]' is not 4 numbers"),
    ],
)
def test_numbers_that_are_not_numbers_name_row_field_and_value(tmp_path, field, value, message):
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 1 \({LOW}\): {message}"):
        build(make_folder(tmp_path, [record(ORIGINAL), record(LOW, **{field: value})]))


@pytest.mark.parametrize("box", ["(5, 5, 10, 8)", "5 5 10 8", "5,5,10,8", "[5.0, 5.0, 10.0, 8.0]"])
def test_box_spellings_that_are_numbers_are_read(tmp_path, box):
    ds = build(make_folder(tmp_path, [record(ORIGINAL, target_bbox=box)]))
    assert ds[0]["target_bbox"] == [5, 5, 10, 8]


def test_nan_rel_score_is_not_given(tmp_path):
    ds = build(make_folder(tmp_path, [record(LOW, rel_score="NaN"), record(ORIGINAL)]))
    assert ds["rel_score"] == [None, None]


def write_metadata(tmp_path: Path, filename: str, data: bytes) -> Path:
    folder = tmp_path / "cooco"
    folder.mkdir()
    write_jpeg(folder / ORIGINAL)
    (folder / filename).write_bytes(data)
    return folder


GOOD_LINE = json.dumps(record(ORIGINAL))


@pytest.mark.parametrize(
    "filename, data, message",
    [
        ("metadata.json", b'[{"file_name": "a.jpg",\n "scene": kitchen}]', r"metadata.json line 2 column 11: not JSON"),
        (
            "metadata.json",
            b'{"items": []}',
            r"metadata.json: a JSON object needs a 'rows' list .*keys seen: \['items'\]",
        ),
        ("metadata.json", b"[1, 2]", r"metadata.json row 0: expected a JSON object \(one row\), got int"),
        ("metadata.json", b"[]", r"metadata.json: no rows"),
        ("metadata.jsonl", f"{GOOD_LINE}\n\n{GOOD_LINE[:-5]}\n".encode(), r"metadata.jsonl line 3: not JSON"),
        ("metadata.jsonl", f"{GOOD_LINE}\n[1, 2]\n".encode(), r"metadata.jsonl line 2: expected a JSON object"),
        ("metadata.jsonl", b"\n\n", r"metadata.jsonl: empty"),
        (
            "metadata.csv",
            "file_name,scene\na.jpg,kitchen\nb.jpg,caf\xe9\n".encode("latin-1"),
            r"metadata.csv line 3: not UTF-8 \(byte 0xe9 at offset 39\).*UTF-8",
        ),
        ("metadata.csv", b"", r"metadata.csv: empty \(no header, no rows\)"),
        ("metadata.csv", b"file_name,scene,target\n", r"metadata.csv: a header \(.*\) but no rows"),
        (
            "metadata.csv",
            b"file_name,scene\na.jpg,kitchen,extra\n",
            r"metadata.csv line 2: 3 fields, but the header has 2",
        ),
        (
            "metadata.csv",
            b"file_name,scene,file_name\na.jpg,kitchen,b.jpg\n",
            r"metadata.csv line 1: columns \['file_name'\] appear more than once",
        ),
        (
            "metadata.csv",
            b'file_name,scene\n"a.jpg,kitchen\n',
            r"metadata.csv line 2: not valid CSV \(unexpected end of data\)",
        ),
    ],
)
def test_metadata_read_errors_name_the_file_and_line(tmp_path, filename, data, message):
    folder = write_metadata(tmp_path, filename, data)
    with pytest.raises(cooco.CoocoBuildError, match=message) as caught:
        build(folder)
    assert str(folder / filename) in str(caught.value)


def test_csv_with_a_byte_order_mark_builds(tmp_path):
    folder = make_folder(tmp_path, [record(ORIGINAL), record(LOW)])
    path = folder / "metadata.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # what Excel's "CSV UTF-8" writes
    ds = build(folder)
    assert ds["image_id"] == [Path(ORIGINAL).stem, Path(LOW).stem]


def test_json_rows_object_is_read(tmp_path):
    folder = write_metadata(tmp_path, "metadata.json", json.dumps({"rows": [record(ORIGINAL)]}).encode())
    assert build(folder)["gold_label"] == ["cup"]


# -- empty selections -------------------------------------------------------------------------


@pytest.mark.parametrize("excluded", ["1.0", "yes"])
def test_every_row_excluded_is_an_error_saying_so(tmp_path, excluded):
    folder = make_folder(tmp_path, [record(ORIGINAL, excluded=excluded), record(LOW, excluded=excluded), record(CLEAN)])
    with pytest.raises(cooco.CoocoBuildError, match=r"nothing to evaluate: all 3 rows are excluded \(2\) or clean \(1"):
        build(folder)


def test_ensure_schema_rejects_a_dataset_with_nothing_to_evaluate(tmp_path):
    ds = build(make_folder(tmp_path, [record(ORIGINAL), record(CLEAN)]))
    assert cooco.ensure_schema(ds) is ds
    gone = ds.map(lambda row: {"excluded": True})
    with pytest.raises(cooco.CoocoBuildError, match=r"the COOCO dataset: nothing to evaluate: all 2 rows"):
        cooco.ensure_schema(gone)


def test_no_rows_is_an_error():
    with pytest.raises(cooco.CoocoBuildError, match="no columns"):
        cooco.build_dataset([], [])
    with pytest.raises(cooco.CoocoBuildError, match="no rows: nothing to evaluate"):
        cooco.build_dataset([], ["file_name", "scene"])


# -- defect 8 (build time): very large or elongated images ---------------------------------------


@pytest.mark.parametrize(
    "size, message",
    [
        (
            (10000, 50),
            r"10000x50 image \(longer side above 4096, aspect 200:1, above 4:1\) is padded to a 10000x10000 square",
        ),
        (
            (400, 50),
            r"400x50 image \(aspect 8:1, above 4:1\) is padded to a 400x400 square for every view, 8x its own pixels",
        ),
        ((4200, 3000), r"4200x3000 image \(longer side above 4096\) .* about 0.5 GB"),
    ],
)
def test_large_or_elongated_images_warn_with_their_size(tmp_path, size, message):
    folder = make_folder(tmp_path, [record(ORIGINAL), record(LOW)])
    Image.new("RGB", size, (9, 9, 9)).save(folder / LOW, format="JPEG")
    notes: list[str] = []
    with pytest.warns(CoocoBuildWarning, match=rf"1 very large or elongated images: {Path(LOW).stem}: {message}"):
        ds = build(folder, notes=notes)
    assert (ds[1]["width"], ds[1]["height"]) == size  # stored as released, not resized
    assert len(notes) == 1 and notes[0].startswith(f"warning: {Path(LOW).stem}: {size[0]}x{size[1]} image")


def test_ordinary_images_do_not_warn(tmp_path):
    folder = make_folder(tmp_path, [record(ORIGINAL), record(LOW)])
    Image.new("RGB", (640, 480)).save(folder / LOW, format="JPEG")
    notes: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoocoBuildWarning)
        build(folder, notes=notes)
    assert notes == []
    assert size_warning(4096, 1024) is None and size_warning(4097, 1025) is not None


# -- the command line -------------------------------------------------------------------------------


def test_command_line_errors_flags_and_warnings(tmp_path, capsys):
    folder = make_folder(tmp_path, [record(ORIGINAL, target="toilet"), record(LOW)])
    write_jpeg(folder / CLEAN)  # no metadata row
    Image.new("RGB", (400, 50)).save(folder / LOW, format="JPEG")
    out = tmp_path / "built"
    argv = ["build", "cooco", "--from-folder", str(folder), "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lmms-scene build cooco: error: 1 images in {folder} without a metadata row: {CLEAN}")
    assert not out.exists()
    assert cli.main([*argv, "--skip-unmatched"]) == 2
    err = capsys.readouterr().err
    assert f"error: row 0 ({ORIGINAL}): target 'toilet' in the metadata contradicts the file name's 'cup'" in err
    assert cli.main([*argv, "--skip-unmatched", "--prefer-metadata"]) == 0
    err = capsys.readouterr().err
    assert f"lmms-scene build cooco: warning: 1 very large or elongated images: {Path(LOW).stem}: 400x50 image" in err
    assert "2 build decisions recorded in the card" in err
    card = (out / "README.md").read_text()
    assert f"- row 0 ({ORIGINAL}): target 'toilet' taken from the metadata; the file name says 'cup'" in card
    assert f"- skipped (image without a metadata row): {CLEAN}" in card
    assert f"- warning: {Path(LOW).stem}: 400x50 image" in card
    assert "not resized" in card
