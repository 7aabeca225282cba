"""COOCO builder (schema, file names, bad input naming the row), embedded sample, and
the task's document views (noise grid expansion, padded geometry)."""

from __future__ import annotations

import csv
import io
import json
import types
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lmms_scene import cli, imaging
from lmms_scene.data import cooco

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tasks" / "cooco" / cooco.SAMPLE_FILE


@pytest.mark.parametrize(
    "name, scene, target, swapped, condition",
    [
        ("000000064659_cubicle_office_laptop_original.jpg", "cubicle_office", "laptop", "", "original"),
        ("000000064659_cubicle_office_laptop_clean.jpg", "cubicle_office", "laptop", "", "clean"),
        ("000000064659_cubicle_office_laptop_ham_relscore_low.jpg", "cubicle_office", "laptop", "ham", "low"),
        ("000000064659_cubicle_office_laptop_box_relscore_middle.jpg", "cubicle_office", "laptop", "box", "medium"),
        (
            "000000064659_cubicle_office_laptop_laptop_relscore_same_target.jpg",
            "cubicle_office",
            "laptop",
            "laptop",
            "same_target",
        ),
        ("000000000001_street_stop_sign_traffic_cone_relscore_high.jpg", "street", "stop_sign", "traffic_cone", "high"),
        ("000000000002_living_room_potted_plant_relscore_low.jpg", "living_room", "potted_plant", "", "low"),
    ],
)
def test_parse_filename(name, scene, target, swapped, condition):
    parsed = cooco.parse_filename(name)
    assert (parsed["scene"], parsed["target"], parsed["swapped_object"], parsed["condition"]) == (
        scene,
        target,
        swapped,
        condition,
    )
    assert parsed["image_id"] == Path(name).stem and len(parsed["coco_id"]) == 12


@pytest.mark.parametrize(
    "name, message",
    [
        ("64659_kitchen_cup_original.jpg", "12-digit"),
        ("000000064659_kitchen_cup_relscore_weird.jpg", "condition suffix"),
        ("000000064659_spaceship_cup_original.jpg", "scene"),
        ("000000064659_kitchen_spoon_original.jpg", "target"),
    ],
)
def test_parse_filename_rejects_unknown_names(name, message):
    with pytest.raises(ValueError, match=message):
        cooco.parse_filename(name)


# -- building from a folder -----------------------------------------------------------


def write_image(path: Path, mode: str = "RGB", size=(40, 30)) -> None:
    colour = {"RGB": (10, 200, 30), "RGBA": (10, 200, 30, 0), "L": 90, "CMYK": (0, 50, 100, 0)}[mode]
    image = Image.new(mode, size, colour)
    image.save(path, format="PNG" if mode in ("RGBA", "L") else "JPEG")


GOOD = [
    ("000000000011_kitchen_cup_original.jpg", "", "original", [5, 5, 10, 8]),
    ("000000000011_kitchen_cup_ham_relscore_low.jpg", "ham", "relscore_low", [5, 5, 10, 8]),
    ("000000000011_kitchen_cup_cup_relscore_same_target.jpg", "cup", "relscore_same_target", [5, 5, 10, 8]),
    ("000000000011_kitchen_cup_clean.jpg", "", "clean", [5, 5, 10, 8]),
]


def make_folder(tmp_path: Path, rows=GOOD, modes=None, extra_columns=None, fmt="csv") -> Path:
    folder = tmp_path / "cooco"
    folder.mkdir()
    records = []
    for k, (name, swapped, rel_level, box) in enumerate(rows):
        mode = (modes or {}).get(k, "RGB")
        if mode is not None:
            write_image(folder / name, mode)
        record = {
            "file_name": name,
            "scene": "kitchen",
            "target": "cup",
            "swapped_object": swapped,
            "target_bbox": json.dumps(box),
            "rel_level": rel_level,
            "rel_score": "0.1" if swapped else "",
            "excluded": "False",
        }
        record.update(extra_columns or {})
        records.append(record)
    if fmt == "csv":
        with (folder / "metadata.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    else:
        (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    return folder


def build(folder: Path, **kw):
    rows, columns = cooco.folder_rows(folder)
    return cooco.build_dataset(rows, columns, base=folder, **kw)


def test_build_from_folder_has_the_schema_and_gold_labels(tmp_path):
    ds = build(make_folder(tmp_path))
    assert ds.features == cooco.features()
    assert ds["condition"] == ["original", "low", "same_target", "clean"]
    assert ds["gold_label"] == ["cup", "ham", "cup", ""]
    assert ds["swapped_object"] == ["", "ham", "cup", ""]
    assert ds["rel_score"][0] is None and ds["rel_score"][1] == pytest.approx(0.1)
    assert ds[0]["width"] == 40 and ds[0]["height"] == 30 and ds[0]["target_bbox"] == [5, 5, 10, 8]
    # the source JPEG bytes are stored as they are (no re-encoding)
    raw = (tmp_path / "cooco" / GOOD[0][0]).read_bytes()
    from datasets import Image as HFImage

    assert ds.cast_column("image", HFImage(decode=False))[0]["image"]["bytes"] == raw


def test_build_reads_jsonl_metadata(tmp_path):
    assert len(build(make_folder(tmp_path, fmt="jsonl"))) == 4


@pytest.mark.parametrize(
    "row, message",
    [
        (("000000000011_kitchen_cup_original.jpg", "", "original", [35, 5, 10, 8]), "outside the 40x30 image"),
        (("000000000011_kitchen_cup_original.jpg", "", "original", [5, 5, 0, 8]), "zero or negative area"),
        (
            ("000000000011_kitchen_cup_original.jpg", "", "relscore_bogus", [5, 5, 10, 8]),
            "unknown condition 'relscore_bogus'",
        ),
        (("000000000011_kitchen_cup_relscore_low.jpg", "", "relscore_low", [5, 5, 10, 8]), "needs a swapped_object"),
    ],
)
def test_bad_rows_fail_naming_the_row(tmp_path, row, message):
    rows = [GOOD[1], row]
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 1 \({row[0]}\): .*{message}"):
        build(make_folder(tmp_path, rows=rows))


def test_missing_image_fails_naming_the_row(tmp_path):
    with pytest.raises(cooco.CoocoBuildError, match=rf"row 2 \({GOOD[2][0]}\): image file not found"):
        build(make_folder(tmp_path, modes={2: None}))


def test_duplicate_images_fail(tmp_path):
    with pytest.raises(cooco.CoocoBuildError, match="row 1 .*duplicate of row 0"):
        build(make_folder(tmp_path, rows=[GOOD[0], GOOD[0]]))


@pytest.mark.parametrize("mode", ["RGBA", "L", "CMYK"])
def test_non_rgb_images_are_converted_to_rgb(tmp_path, mode):
    ds = build(make_folder(tmp_path, modes={0: mode}))
    image = ds[0]["image"]
    assert image.mode == "RGB" and image.size == (40, 30)
    if mode == "RGBA":  # fully transparent: the padding grey
        assert image.getpixel((0, 0)) == imaging.PAD_COLOUR
    if mode == "L":
        assert image.getpixel((0, 0)) == (90, 90, 90)


def test_unknown_columns_fail_loudly_and_can_be_mapped(tmp_path):
    folder = make_folder(tmp_path, extra_columns={"annotator": "x"})
    with pytest.raises(cooco.CoocoBuildError, match=r"unknown COOCO source columns \['annotator'\]"):
        build(folder)
    assert len(build(folder, column_map={"annotator": None})) == 4


def test_command_line_builds_saves_and_reports_errors(tmp_path, capsys):
    folder = make_folder(tmp_path)
    out = tmp_path / "built"
    assert cli.main(["build", "cooco", "--from-folder", str(folder), "--out", str(out), "--name", "mine"]) == 0
    printed = capsys.readouterr().out
    from datasets import load_dataset

    # the hub layout: data/*.parquet plus a card whose configs point at it
    built = load_dataset(str(out))
    assert built["test"].features == cooco.features() and len(built["test"]) == 4
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlicense:") and "| low | 1 |" in card and "arXiv:2506.22274" in card
    # the tasks that evaluate it, and the command that runs them, printed
    assert sorted(p.name for p in (out / "tasks").iterdir()) == ["cooco_mine.yaml", "cooco_noise_mine.yaml"]
    assert f"lmms-scene eval --include_path {(out / 'tasks').resolve()} --tasks cooco_mine --model" in printed
    (tmp_path / "bad").mkdir()
    bad = make_folder(tmp_path / "bad", rows=[GOOD[0], (GOOD[1][0], "ham", "relscore_low", [5, 5, 100, 8])])
    assert cli.main(["build", "cooco", "--from-folder", str(bad), "--out", str(tmp_path / "o2")]) == 2
    assert f"row 1 ({GOOD[1][0]}): box" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


def _hub_style(rel_score: float = 0.1):
    """One row in the hub release's own columns (not COOCO's)."""
    from datasets import Dataset, Features, Sequence, Value
    from datasets import Image as HFImage

    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(buffer, format="JPEG")
    return Dataset.from_list(
        [
            {
                "image": {"bytes": buffer.getvalue(), "path": GOOD[1][0]},
                "scene": "kitchen",
                "target": "cup",
                "swapped_object": "ham",
                "target_bbox": [5.0, 5.0, 10.0, 8.0],
                "rel_level": "relscore_low",
                "rel_score": rel_score,
                "excluded": False,
            }
        ],
        features=Features(
            {
                "image": HFImage(),
                "scene": Value("string"),
                "target": Value("string"),
                "swapped_object": Value("string"),
                "target_bbox": Sequence(Value("float32")),
                "rel_level": Value("string"),
                "rel_score": Value("float32"),
                "excluded": Value("bool"),
            }
        ),
    )


def test_hub_style_rows_are_converted_by_ensure_schema(tmp_path):
    hub = _hub_style()
    converted = cooco.ensure_schema(hub)
    assert converted.features == cooco.features()
    assert converted[0]["image_id"] == Path(GOOD[1][0]).stem and converted[0]["gold_label"] == "ham"
    with pytest.raises(cooco.CoocoBuildError, match="unknown COOCO source columns"):
        cooco.ensure_schema(hub.add_column("mystery", ["?"]))


def test_the_conversion_is_fingerprinted_from_its_input_not_by_pickling_the_function(monkeypatch):
    """``datasets`` names a map's result by dill-pickling the mapped function and every
    module its globals reach: with spaCy, WordNet and a sentence encoder loaded (the
    models lmms_scene.cache holds), that took 27 s for one row. ensure_schema names the
    result itself (recheck.map_fingerprint): no function is pickled, the same input gets
    the same name and another input or another column mapping another."""
    from datasets import arrow_dataset, fingerprint

    from lmms_scene.data import recheck

    pickled = []
    real = fingerprint.update_fingerprint

    def spy(base, transform, transform_args):
        pickled.extend(k for k, v in transform_args.items() if isinstance(v, types.FunctionType))
        return real(base, transform, transform_args)

    for module in (fingerprint, arrow_dataset):  # map's own fingerprint, and the decorated transforms'
        monkeypatch.setattr(module, "update_fingerprint", spy)
    hub = _hub_style()
    first, again = cooco.ensure_schema(hub), cooco.ensure_schema(hub)
    assert pickled == []
    assert first._fingerprint == again._fingerprint
    assert cooco.ensure_schema(_hub_style(rel_score=0.2))._fingerprint != first._fingerprint
    mapping = cooco.map_columns(hub.column_names)
    one = recheck.map_fingerprint(hub, "cooco.ensure_schema", mapping)
    assert one == recheck.map_fingerprint(hub, "cooco.ensure_schema", dict(mapping))
    assert one != recheck.map_fingerprint(hub, "cooco.ensure_schema", {**mapping, "scene": None})
    assert one != recheck.map_fingerprint(hub, "another.step", mapping)
    # a dataset without a fingerprint leaves the name to datasets
    assert recheck.map_fingerprint(object(), "cooco.ensure_schema", mapping) is None


# -- embedded sample and task views -----------------------------------------------------


@pytest.fixture(scope="module")
def sample():
    from datasets import load_dataset

    return load_dataset("parquet", data_files={"test": str(SAMPLE)})["test"]


def test_sample_is_small_has_the_schema_and_every_condition(sample):
    assert SAMPLE.stat().st_size < 300_000
    assert sample.features == cooco.features()
    assert set(sample["condition"]) == set(cooco.CONDITIONS)
    assert 25 <= len(cooco.naming_docs(sample)) <= 40


def test_sample_regenerates_identically(tmp_path, sample):
    (path,) = cooco.build_sample(tmp_path)
    from datasets import load_dataset

    fresh = load_dataset("parquet", data_files={"test": str(path)})["test"]
    assert fresh["image_id"] == sample["image_id"] and fresh["target_bbox"] == sample["target_bbox"]
    for a, b in zip(fresh, sample):
        assert np.array_equal(np.asarray(a["image"]), np.asarray(b["image"]))


def test_naming_docs_drop_clean_and_excluded(sample):
    docs = cooco.naming_docs(sample)
    assert "clean" not in docs["condition"] and not any(docs["excluded"])
    assert len(docs) == sum(1 for c, e in zip(sample["condition"], sample["excluded"]) if c != "clean" and not e)
    assert set(docs["noise_area"]) == {"none"} and set(docs["noise_level"]) == {0.0}


def test_noise_grid_has_each_item_once_per_setting(sample):
    items = cooco.naming_docs(sample)
    grid = cooco.noise_grid_docs(sample)
    assert len(grid) == 6 * len(items)
    keys = list(zip(grid["image_id"], grid["noise_area"], grid["noise_level"]))
    assert len(set(keys)) == len(keys)
    assert {(a, lv) for _, a, lv in keys} == {(a, lv) for a in ("target", "context", "all") for lv in (0.5, 1.0)}
    assert isinstance(grid[0]["image"], Image.Image) and grid[0]["image_id"] == items[0]["image_id"]
    # item by item: the first six rows are the first item under every setting
    assert {(grid[k]["image_id"], grid[k]["noise_area"], grid[k]["noise_level"]) for k in range(6)} == {
        (items[0]["image_id"], a, lv) for a in ("target", "context", "all") for lv in (0.5, 1.0)
    }


def test_visual_applies_the_docs_noise_deterministically(sample):
    grid = cooco.noise_grid_docs(sample)
    doc = next(d for d in grid if d["noise_area"] == "target" and d["noise_level"] == 1.0)
    clean, box = cooco.padded(doc)
    a, b = np.asarray(cooco.visual(doc)), np.asarray(cooco.visual(dict(doc)))
    assert np.array_equal(a, b)
    x0, y0, x1, y1 = imaging.box_pixels(box, clean.size)
    outside = np.ones(a.shape[:2], dtype=bool)
    outside[y0:y1, x0:x1] = False
    assert np.array_equal(a[outside], np.asarray(clean)[outside])
    assert not np.array_equal(a[~outside], np.asarray(clean)[~outside])
    level0 = cooco.naming_docs(sample)[0]
    assert np.array_equal(np.asarray(cooco.visual(level0)), np.asarray(cooco.padded(level0)[0]))


def test_prompt_geometry_matches_the_padded_image(sample):
    for doc in cooco.naming_docs(sample):
        image, box = cooco.padded(doc)
        side, geo_box = cooco.padded_geometry(doc)
        assert side == image.size[0] and geo_box == pytest.approx(box)
        crop = cooco.target_crop(doc)
        ctx = cooco.prompt_context(doc)
        assert crop.size == (ctx["x2"] - ctx["x1"], ctx["y2"] - ctx["y1"])


def test_metadata_condition_must_agree_with_the_file_name(tmp_path):
    row = ("000000000011_kitchen_cup_ham_relscore_low.jpg", "ham", "relscore_high", [5, 5, 10, 8])
    with pytest.raises(cooco.CoocoBuildError, match=r"row 0 .*contradicts the file name's 'relscore_low'"):
        build(make_folder(tmp_path, rows=[row]))


def test_names_outside_the_scheme_are_fine_with_full_metadata_and_a_coco_id(tmp_path):
    row = ("photo_17.jpg", "ham", "relscore_low", [5, 5, 10, 8])
    # without a COCO id (the file name carries none) the row is an error naming the file,
    # never a silently empty coco_id
    with pytest.raises(
        cooco.CoocoBuildError, match=r"row 0 \(photo_17.jpg\): no COCO image id: .*photo_17.jpg.* coco_id"
    ):
        build(make_folder(tmp_path, rows=[row]))
    (tmp_path / "with_id").mkdir()
    ds = build(make_folder(tmp_path / "with_id", rows=[row], extra_columns={"coco_id": "64659"}))
    assert ds[0]["image_id"] == "photo_17" and ds[0]["condition"] == "low" and ds[0]["coco_id"] == "000000064659"


# -- EXIF orientation, duplicate ids, one noise field per (image, level) ---------------------


def write_oriented_jpeg(path: Path) -> np.ndarray:
    """A 60 x 30 JPEG tagged EXIF Orientation=6 (viewers rotate it to 30 x 60); returns
    its raw decoded pixels."""
    arr = np.zeros((30, 60, 3), dtype=np.uint8)
    arr[:, :30] = (220, 30, 30)
    arr[:, 30:] = (30, 30, 220)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(arr).save(path, format="JPEG", quality=95, exif=exif.tobytes())
    with Image.open(path) as raw:
        assert raw.size == (60, 30) and raw.getexif().get(0x0112) == 6
        return np.asarray(raw.convert("RGB"))


def test_exif_rotated_jpeg_is_stored_as_its_raw_pixels(tmp_path):
    folder = make_folder(tmp_path, rows=[GOOD[1]])
    raw = write_oriented_jpeg(folder / GOOD[1][0])
    ds = build(folder)
    row = ds[0]
    # the decoded image is the one width/height and the box refer to, pixel for pixel
    assert (row["width"], row["height"]) == (60, 30)
    assert row["image"].size == (60, 30)
    assert np.array_equal(np.asarray(row["image"].convert("RGB")), raw)
    from datasets import Image as HFImage

    stored = ds.cast_column("image", HFImage(decode=False))[0]["image"]["bytes"]
    with Image.open(io.BytesIO(stored)) as again:
        assert again.format == "PNG" and again.getexif().get(0x0112) in (None, 1)
    doc = {**row, "noise_area": "none", "noise_level": 0.0}
    image, box = cooco.padded(doc)
    assert image.size == (60, 60) and box == pytest.approx((5.0, 20.0, 10.0, 8.0))


def test_padded_rejects_an_image_whose_size_is_not_the_rows(tmp_path):
    doc = {
        "image_id": "000000000011_kitchen_cup_original",
        "image": Image.new("RGB", (30, 60)),
        "width": 60,
        "height": 30,
        "target_bbox": [5.0, 5.0, 10.0, 8.0],
    }
    with pytest.raises(
        ValueError, match=r"000000000011_kitchen_cup_original: decoded image is 30x60 but the row says 60x30"
    ):
        cooco.padded(doc)


def test_ensure_schema_rejects_duplicate_image_ids(sample, tmp_path):
    from datasets import concatenate_datasets

    twice = concatenate_datasets([sample, sample.select([3])])
    first = sample[3]["image_id"]
    with pytest.raises(cooco.CoocoBuildError, match=rf"duplicate image_id .*{first} \(rows 3, {len(sample)}\)"):
        cooco.ensure_schema(twice)
    assert cooco.ensure_schema(sample) is sample


def test_ensure_schema_rejects_duplicates_among_hub_rows():
    from datasets import Dataset

    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(buffer, format="JPEG")
    record = {
        "image": {"bytes": buffer.getvalue(), "path": GOOD[1][0]},
        "scene": "kitchen",
        "target": "cup",
        "swapped_object": "ham",
        "target_bbox": [5.0, 5.0, 10.0, 8.0],
        "rel_level": "relscore_low",
    }
    hub = Dataset.from_list([record, record])
    with pytest.raises(cooco.CoocoBuildError, match=rf"duplicate image_id .*{Path(GOOD[1][0]).stem} \(rows 0, 1\)"):
        cooco.ensure_schema(hub)


@pytest.mark.parametrize("level", [0.5, 1.0])
def test_all_noise_is_target_noise_inside_and_context_noise_outside(sample, level):
    import importlib

    utils = importlib.import_module("lmms_scene.tasks.cooco.utils")
    grid = cooco.noise_grid_docs(sample)
    first = grid[0]["image_id"]
    docs = {d["noise_area"]: d for d in grid.select(range(6)) if d["noise_level"] == level and d["image_id"] == first}
    assert set(docs) == {"target", "context", "all"}
    views = {a: np.asarray(utils.doc_to_visual(d)[0]) for a, d in docs.items()}
    clean, box = cooco.padded(docs["all"])
    x0, y0, x1, y1 = imaging.box_pixels(box, clean.size)
    inside = np.zeros(views["all"].shape[:2], dtype=bool)
    inside[y0:y1, x0:x1] = True
    assert np.array_equal(views["all"][inside], views["target"][inside])
    assert np.array_equal(views["all"][~inside], views["context"][~inside])
    # and it is noise, deterministic per (image, level)
    assert not np.array_equal(views["all"], np.asarray(clean))
    assert np.array_equal(views["all"], np.asarray(cooco.visual(dict(docs["all"]))))
