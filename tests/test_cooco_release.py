"""COOCO as the authors publish it (issue 20): a small release written here in their exact
format from real COCO 2017 images (../shared/fixtures/tiny_coco): one JSON object keyed
by image file name (``filter_dataset.py``'s ``final_dataset.json``), SUN scene spellings
with a slash, both file-name schemes (``_`` and the 2025 scripts' ``__``), THINGSplus
replacement names (``bat_(sports)``, ``baseball_``), the extra fields of the originals,
an excluded row and clean images. Checked: the build, its errors (a scrambled box, an
empty COCO id, an unknown hub column), the noise regions against an independent
``map(int, bbox)`` computation, the crop against PIL's, the hub path through a locally
saved dataset, and whole runs with ``scene_blind`` through the harness."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import find_samples, fixture_dir
from PIL import Image, ImageDraw

from lmms_scene import cli, imaging
from lmms_scene.data import cooco

#: (COCO image, split, scene as the authors' metadata spells it, COCO-Search18 target,
#: its instance annotation id, low / middle / high replacements in THINGSplus spelling)
IMAGES = (
    ("000000397133", "val2017", "kitchen", "bottle", 82445, "bat_(sports)", "baseball_", "jar"),
    ("000000037777", "val2017", "cubicle/office", "potted_plant", 22328, "anchor", "lamp", "vase"),
    ("000000122745", "val2017", "market/outdoor", "stop_sign", 271021, "bat_(sports)", "bench", "traffic_cone"),
    ("000000403385", "val2017", "bathroom", "toilet", 1096418, "anchor", "baseball_", "bathtub"),
)
#: the row the authors' verification rejected
EXCLUDED = "000000403385_bathroom_toilet_baseball__relscore_middle.jpg"
METADATA = "final_dataset_resized.json"


def _annotations(split: str) -> dict:
    root = fixture_dir("tiny_coco", "annotations")
    out = json.loads((root / f"instances_{split}.json").read_text())
    captions = root / f"captions_{split}.json"
    out["captions"] = json.loads(captions.read_text())["annotations"] if captions.exists() else []
    return out


def fitted_box(box, size) -> list[int]:
    """A generated image's box as the inpainting step leaves it (written here from the
    paper's description): the COCO box widened or heightened about its centre to an
    aspect w/h in [0.5, 2], kept inside the image, truncated to integers."""
    x, y, w, h = box
    width, height = size
    new_w, new_h = (0.5 * h, h) if w / h < 0.5 else ((w, w / 2) if w / h > 2 else (w, h))
    new_x = min(max(0.0, x + (w - new_w) / 2), width - new_w)
    new_y = min(max(0.0, y + (h - new_h) / 2), height - new_h)
    return [int(new_x), int(new_y), int(new_w), int(new_h)]


def _fixations(target: str, box, rng) -> list[dict]:
    """Synthetic COCO-Search18-style gaze records (the shape the authors' docstring lists)."""
    x, y, w, h = box
    return [
        {
            "name": "img",
            "subject": s,
            "condition": "present",
            "task": target.replace("_", " "),
            "X": [float(x + w * rng.random()) for _ in range(3)],
            "Y": [float(y + h * rng.random()) for _ in range(3)],
            "T": [int(rng.integers(80, 400)) for _ in range(3)],
            "length": 3,
            "split": "train",
            "fixOnTarget": True,
            "correct": 1,
        }
        for s in (1, 2)
    ]


def _edited(source: Path, box, colour) -> bytes:
    """The COCO image with a filled shape in ``box`` (a stand-in for the inpainted object)."""
    import io

    with Image.open(source) as im:
        image = im.convert("RGB")
    x, y, w, h = box
    ImageDraw.Draw(image).ellipse((x, y, x + w - 1, y + h - 1), fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_release(root: Path) -> tuple[Path, dict]:
    """The release folder (originals at the top, generated images in ``generated/``, as
    the authors' scripts write them to separate folders) and its metadata dict."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True)
    (root / "generated").mkdir()
    metadata: dict[str, dict] = {}
    for coco_id, split, scene, target, ann_id, low, middle, high in IMAGES:
        annotations = _annotations(split)
        source = fixture_dir("tiny_coco", split, f"{coco_id}.jpg")
        with Image.open(source) as im:
            size = im.size
        ann = next(a for a in annotations["annotations"] if a["id"] == ann_id)
        box = ann["bbox"]  # COCO floats, as the authors' metadata keeps them for originals
        file_scene = scene.replace("/", "_")
        original = f"{coco_id}_{file_scene}_{target}_original.jpg"
        shutil.copyfile(source, root / original)
        extras = {
            "fixations": _fixations(target, box, rng),
            f"captions_{split}_annotations": [c for c in annotations["captions"] if c["image_id"] == int(coco_id)],
            f"instances_{split}_annotations": [a for a in annotations["annotations"] if a["image_id"] == int(coco_id)],
        }
        metadata[original] = {
            **extras,
            "scene": scene,
            "target": target,
            "swapped_object": None,
            "target_bbox": box,
            "rel_level": None,
            "rel_score": 0.41,
            "excluded": False,
        }
        # the clean image copies its original's entry (the authors' resizing script)
        clean = f"{coco_id}_{file_scene}_{target}_clean.jpg"
        (root / "generated" / clean).write_bytes(_edited(source, box, (128, 128, 128)))
        metadata[clean] = dict(metadata[original])
        fitted = fitted_box(box, size)
        generated = {
            f"{coco_id}_{file_scene}_{target}_{low}_relscore_low.jpg": (low, "low", 0.05),
            f"{coco_id}_{file_scene}_{target}_{middle}_relscore_middle.jpg": (middle, "middle", 0.24),
            # the 2025 scripts: double underscores
            f"{coco_id}__{file_scene}__{target}__{target}_relscore_same_target.jpg": (target, "same_target", 0.41),
            f"{coco_id}__{file_scene}__{target}__{high}_relscore_high.jpg": (high, "high", 0.52),
        }
        for k, (name, (swapped, level, score)) in enumerate(generated.items()):
            (root / "generated" / name).write_bytes(_edited(source, fitted, (40 * k, 200, 90)))
            metadata[name] = {
                "scene": scene,
                "target": target,
                "swapped_object": swapped,
                "target_bbox": fitted,
                "rel_level": level,
                "rel_score": score,
                "excluded": name == EXCLUDED,
            }
    (root / METADATA).write_text(json.dumps(metadata))
    return root, metadata


def build_cli(release: Path, out: Path, *extra: str) -> int:
    return cli.main(
        [
            "build",
            "cooco",
            "--from-folder",
            str(release),
            "--metadata",
            str(release / METADATA),
            "--out",
            str(out),
            "--name",
            "authors",
            *extra,
        ]
    )


def load_built(out: Path):
    import datasets

    return datasets.load_dataset("parquet", data_files={"test": str(out / "data" / "test-00000-of-00001.parquet")})[
        "test"
    ]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("authors") / "COOCO")


@pytest.fixture(scope="module")
def built(release, tmp_path_factory):
    folder, _ = release
    out = tmp_path_factory.mktemp("built") / "authors"
    assert build_cli(folder, out) == 0
    return out


# -- the build ------------------------------------------------------------------------


def test_the_authors_format_builds_with_their_spellings(release, built, capsys):
    _, metadata = release
    ds = load_built(built)
    assert len(ds) == len(metadata) == 24
    rows = {r["image_id"] + ".jpg": r for r in ds.remove_columns("image")}
    assert set(rows) == set(metadata)
    for name, row in rows.items():
        meta = metadata[name]
        assert row["coco_id"] == name[:12]
        # the metadata's scene spelling, "_" read as a space: what CLIP is given
        assert row["scene"] == meta["scene"].replace("_", " ")
        assert row["target"] == meta["target"].replace("_", " ")
        assert row["target_bbox"] == pytest.approx(meta["target_bbox"], abs=1e-4)
        assert row["excluded"] is (name == EXCLUDED)
    assert {r["scene"] for r in rows.values()} == {"kitchen", "cubicle/office", "market/outdoor", "bathroom"}
    by_condition = {c: sum(r["condition"] == c for r in rows.values()) for c in cooco.CONDITIONS}
    assert by_condition == {"original": 4, "same_target": 4, "high": 4, "medium": 4, "low": 4, "clean": 4}
    # gold labels: the replacement with "_" read as a space (THINGSplus spellings kept)
    low = rows["000000397133_kitchen_bottle_bat_(sports)_relscore_low.jpg"]
    assert (low["gold_label"], low["swapped_object"], low["condition"]) == ("bat (sports)", "bat (sports)", "low")
    middle = rows["000000397133_kitchen_bottle_baseball__relscore_middle.jpg"]
    assert (middle["gold_label"], middle["condition"], middle["rel_level"]) == ("baseball", "medium", "middle")
    double = rows["000000037777__cubicle_office__potted_plant__vase_relscore_high.jpg"]
    assert (double["gold_label"], double["condition"], double["scene"]) == ("vase", "high", "cubicle/office")
    same = rows["000000122745__market_outdoor__stop_sign__stop_sign_relscore_same_target.jpg"]
    assert (same["gold_label"], same["condition"]) == ("stop sign", "same_target")
    original = rows["000000037777_cubicle_office_potted_plant_original.jpg"]
    assert (original["gold_label"], original["swapped_object"]) == ("potted plant", "")
    # the card says what was dropped and what the tasks leave out
    card = (built / "README.md").read_text()
    assert (
        "dropped the authors' extra fields `captions_val2017_annotations` (8 rows), `fixations` (8 rows), "
        "`instances_val2017_annotations` (8 rows)" in card
    )
    assert re.search(r"leave out the\s+1 rows flagged `excluded`.*\s+4 clean images", card, re.S)


def test_the_build_prints_what_the_tasks_leave_out(release, tmp_path, capsys):
    folder, _ = release
    assert build_cli(folder, tmp_path / "again") == 0
    printed = capsys.readouterr().out
    assert "24 rows, 19 naming items; the tasks leave out 1 excluded rows and 4 clean images" in printed


def _rewrite(release, tmp_path, change) -> Path:
    """A copy of the release whose metadata ``change(metadata)`` edits."""
    folder, metadata = release
    copy = tmp_path / "COOCO"
    shutil.copytree(folder, copy)
    edited = json.loads(json.dumps(metadata))
    change(edited, copy)
    (copy / METADATA).write_text(json.dumps(edited))
    return copy


SCRAMBLED = "000000397133_kitchen_bottle_bat_(sports)_relscore_low.jpg"


def test_a_scrambled_box_is_an_error_naming_the_file_with_both_readings(release, tmp_path, capsys):
    _, metadata = release
    x, y, w, h = metadata[SCRAMBLED]["target_bbox"]
    # read as [x, y, w, h], the [x, w, y, h] box is 240 wide and 57 high: no box the
    # inpainting step leaves (aspect 4.2)
    assert cooco.box_problem([x, w, y, h], (640, 427), generated=True) is not None

    def scramble(meta, _):
        meta[SCRAMBLED]["target_bbox"] = [x, w, y, h]

    copy = _rewrite(release, tmp_path, scramble)
    assert build_cli(copy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"({SCRAMBLED}): box [{x}, {w}, {y}, {h}] read as [x, y, w, h] has aspect w/h = {y / h:.2f}" in err
    assert f"read as [x, w, y, h] it is x={x}, y={y}, w={w}, h={h}, inside the image" in err
    assert "pass --box-format xwyh (or generated=xwyh" in err and f"file {copy / 'generated' / SCRAMBLED}" in err
    assert not (tmp_path / "out").exists()


def test_a_release_storing_generated_boxes_as_x_w_y_h_builds_with_box_format(release, tmp_path):
    def scramble_all(meta, _):
        for name, row in meta.items():
            if "_relscore_" in name:
                x, y, w, h = row["target_bbox"]
                row["target_bbox"] = [x, w, y, h]

    copy = _rewrite(release, tmp_path, scramble_all)
    assert build_cli(copy, tmp_path / "out", "--box-format", "generated=xwyh") == 0
    _, metadata = release
    ds = load_built(tmp_path / "out").remove_columns("image")
    assert all(r["target_bbox"] == pytest.approx(metadata[r["image_id"] + ".jpg"]["target_bbox"], abs=1e-4) for r in ds)
    assert (
        "target_bbox read as stored in high: xwyh, low: xwyh, medium: xwyh, same_target: xwyh"
        in (tmp_path / "out" / "README.md").read_text()
    )


def test_a_box_that_makes_sense_in_no_order_is_an_error_naming_the_file(release, tmp_path, capsys):
    def outside(meta, _):
        meta["000000037777_cubicle_office_potted_plant_original.jpg"]["target_bbox"] = [340.5, 220.0, 30.0, 30.0]

    copy = _rewrite(release, tmp_path, outside)
    assert build_cli(copy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert (
        "(000000037777_cubicle_office_potted_plant_original.jpg): box [340.5, 220, 30, 30] read as [x, y, w, h] "
        "lies outside the 352x230 image" in err
    )
    assert "--box-format" not in err


def test_an_empty_coco_id_is_an_error_naming_the_file(release, tmp_path, capsys):
    old = "000000403385__bathroom__toilet__bathtub_relscore_high.jpg"
    new = "bathroom__toilet__bathtub_relscore_high.jpg"

    def rename(meta, folder):
        meta[new] = meta.pop(old)
        (folder / "generated" / old).rename(folder / "generated" / new)

    copy = _rewrite(release, tmp_path, rename)
    assert build_cli(copy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"({new}): no COCO image id: the file name '{new}' does not start with a 12-digit COCO id" in err
    assert f"file {copy / 'generated' / new}" in err

    # with the id in the metadata the row builds, and keeps it
    def with_id(meta, _):
        meta[new]["coco_id"] = 403385

    (tmp_path / "b").mkdir()
    fixed = _rewrite((copy, json.loads((copy / METADATA).read_text())), tmp_path / "b", with_id)
    assert build_cli(fixed, tmp_path / "out2") == 0
    row = next(r for r in load_built(tmp_path / "out2").remove_columns("image") if r["image_id"] == Path(new).stem)
    assert row["coco_id"] == "000000403385" and row["condition"] == "high"


def test_an_aspect_outside_the_inpainting_range_is_an_error_or_on_request_a_card_line(release, tmp_path, capsys):
    name = "000000122745_market_outdoor_stop_sign_bench_relscore_middle.jpg"

    def stretch(meta, _):
        meta[name]["target_bbox"] = [100, 100, 300, 60]  # aspect 5 in a 480 x 640 image

    copy = _rewrite(release, tmp_path, stretch)
    assert build_cli(copy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"({name}): box [100, 100, 300, 60] read as [x, y, w, h] has aspect w/h = 5.00, outside [0.5, 2]" in err
    assert build_cli(copy, tmp_path / "out", "--accept-box-aspect") == 0
    assert (
        f"{name}): target_bbox [100.0, 100.0, 300.0, 60.0] has aspect w/h = 5.00"
        in (tmp_path / "out" / "README.md").read_text()
    )


def test_a_bad_box_format_is_an_error_line(release, tmp_path, capsys):
    folder, _ = release
    assert build_cli(folder, tmp_path / "out", "--box-format", "yxhw") == 2
    assert "--box-format 'yxhw': format 'yxhw' is not one of xywh, xyxy, xwyh" in capsys.readouterr().err
    assert build_cli(folder, tmp_path / "out", "--box-format", "inpainted=xwyh") == 2
    assert "'inpainted' is not all, generated, original or a condition" in capsys.readouterr().err


def test_without_metadata_option_the_error_points_at_the_json(release, tmp_path, capsys):
    folder, _ = release
    assert cli.main(["build", "cooco", "--from-folder", str(folder), "--out", str(tmp_path / "o")]) == 2
    assert f"the folder has ['{METADATA}']: if one is the authors' metadata" in capsys.readouterr().err


# -- the evaluation's reading: noise regions and crop, pixel for pixel -------------------


def authors_noise_region(meta_box, width: int, height: int) -> tuple[slice, slice]:
    """Where the authors' ``add_gaussian_noise_in_bbox`` adds noise (written here from
    their description): the box from the metadata, moved onto the grey square, then
    ``x, y, w, h = map(int, bbox)``; rows ``y:min(y + h, S)``, columns ``x:min(x + w, S)``."""
    side = max(width, height)
    x, y, w, h = meta_box
    x, y, w, h = map(int, (x + (side - width) // 2, y + (side - height) // 2, w, h))
    return slice(y, min(y + h, side)), slice(x, min(x + w, side))


@pytest.mark.slow
def test_noise_regions_equal_an_independent_map_int_computation(release, built):
    _, metadata = release
    grid = cooco.noise_grid_docs(load_built(built))
    checked = 0
    for doc in grid:
        if doc["noise_level"] != 1.0:
            continue
        clean, box = cooco.padded(doc)
        rows, cols = authors_noise_region(
            metadata[doc["image_id"] + ".jpg"]["target_bbox"], doc["width"], doc["height"]
        )
        theirs = np.zeros((clean.size[1], clean.size[0]), dtype=bool)
        theirs[rows, cols] = True
        target = imaging.noise_mask(clean.size, box, "target")
        assert np.array_equal(target, theirs), doc["image_id"]
        assert np.array_equal(imaging.noise_mask(clean.size, box, "context"), ~theirs)
        noisy, before = np.asarray(cooco.visual(doc)), np.asarray(clean)
        changed = (noisy != before).any(axis=2)
        area = {"target": theirs, "context": ~theirs, "all": np.ones_like(theirs)}[doc["noise_area"]]
        assert not changed[~area].any(), doc["image_id"]  # nothing outside the region moves
        # and at level 1 nearly every pixel inside does (a white pixel stays white only if
        # all three channels draw e >= 0: 1 in 8)
        assert changed[area].mean() > 0.8
        checked += 1
    assert checked == 3 * 19


def test_the_crop_is_pils_crop_of_the_float_box_before_noise(release, built):
    _, metadata = release
    ds = load_built(built)
    # level 0 and the strongest target noise: the crop RefCLIPScore scores is the same
    noisy = cooco.noise_grid_docs(ds).filter(
        lambda a, lv: a == "target" and lv == 1.0, input_columns=["noise_area", "noise_level"]
    )
    assert len(noisy) == 19
    for doc in [*cooco.naming_docs(ds), *noisy]:
        clean, _ = cooco.padded(doc)
        width, height = doc["width"], doc["height"]
        side = max(width, height)
        x, y, w, h = metadata[doc["image_id"] + ".jpg"]["target_bbox"]
        x, y = x + (side - width) // 2, y + (side - height) // 2
        theirs = clean.crop((x, y, x + w, y + h))  # the authors' get_image_patch
        ours = cooco.target_crop(doc)
        assert ours.size == theirs.size and np.array_equal(np.asarray(ours), np.asarray(theirs)), doc["image_id"]


# -- the hub path: a locally saved dataset standing in for fmerlo/COOCO ------------------


def hub_dataset(release):
    """The release as a hub dataset in the authors' columns (what a push of their
    metadata with the images would hold), images as bytes with their file names."""
    from datasets import Dataset, Features, Sequence, Value
    from datasets import Image as HFImage

    folder, metadata = release
    records = []
    for name, meta in metadata.items():
        path = folder / name if (folder / name).exists() else folder / "generated" / name
        records.append(
            {
                "image": {"bytes": path.read_bytes(), "path": name},
                "scene": meta["scene"],
                "target": meta["target"],
                "swapped_object": meta["swapped_object"],
                "target_bbox": [float(v) for v in meta["target_bbox"]],
                "rel_level": meta["rel_level"],
                "rel_score": meta["rel_score"],
                "excluded": meta["excluded"],
                "fixations": json.dumps(meta.get("fixations")) if "fixations" in meta else None,
            }
        )
    features = Features(
        {
            "image": HFImage(),
            "scene": Value("string"),
            "target": Value("string"),
            "swapped_object": Value("string"),
            "target_bbox": Sequence(Value("float64")),
            "rel_level": Value("string"),
            "rel_score": Value("float64"),
            "excluded": Value("bool"),
            "fixations": Value("string"),
        }
    )
    return Dataset.from_list(records, features=features)


def _comparable(ds):
    keep = [c for c in ds.column_names if c != "image"]
    return sorted(
        tuple(tuple(v) if isinstance(v, list) else v for v in (r[c] for c in keep)) for r in ds.select_columns(keep)
    )


def test_the_hub_path_normalises_through_the_same_mapping(release, built, tmp_path):
    from datasets import DatasetDict

    saved = tmp_path / "hub"
    DatasetDict({"train": hub_dataset(release)}).save_to_disk(str(saved))
    out = tmp_path / "from_hub"
    assert cli.main(["build", "cooco", "--from-hub", str(saved), "--out", str(out), "--name", "hub"]) == 0
    folder_rows = _comparable(load_built(built))
    assert _comparable(load_built(out)) == folder_rows
    card = (out / "README.md").read_text()
    assert "a local dataset standing in for the hub" in card and "`fixations` (8 rows)" in card
    # and the tasks read a hub dataset with the same result (their process_docs path)
    assert _comparable(cooco.ensure_schema(hub_dataset(release))) == folder_rows


def test_a_hub_dataset_with_unknown_columns_names_them_and_the_column_map(release, tmp_path, capsys):
    hub = hub_dataset(release).rename_column("target_bbox", "bbox").add_column("annotator", ["x"] * 24)
    with pytest.raises(cooco.CoocoBuildError) as caught:
        cooco.ensure_schema(hub)
    message = str(caught.value)
    assert "columns ['image', 'scene', 'target', 'swapped_object', 'bbox'" in message
    assert "--column-map bbox=target_bbox --column-map annotator=-" in message
    assert f"lmms-scene build cooco --from-hub {cooco.HUB_REPO} --column-map SOURCE=FIELD" in message
    # the suggested map builds it
    saved = tmp_path / "hub"
    hub.save_to_disk(str(saved))
    args = [
        "build",
        "cooco",
        "--from-hub",
        str(saved),
        "--out",
        str(tmp_path / "o"),
        "--column-map",
        "bbox=target_bbox",
    ]
    assert cli.main(args) == 2
    assert "unknown COOCO source columns ['annotator']" in capsys.readouterr().err
    assert cli.main([*args, "--column-map", "annotator=-"]) == 0


def test_hub_rows_without_file_names_need_a_coco_id(release):
    from datasets import Image as HFImage

    # generated rows: their metadata gives the condition, so only the id is missing
    hub = hub_dataset(release).select([2, 3]).cast_column("image", HFImage(decode=False))
    nameless = hub.map(lambda row: {"image": {"bytes": row["image"]["bytes"], "path": None}})
    with pytest.raises(cooco.CoocoBuildError, match=r"row 0: .*no COCO image id: the row has no image file name"):
        cooco.ensure_schema(nameless)


def test_a_coco_id_that_contradicts_the_file_name_is_an_error(release, tmp_path, capsys):
    name = "000000397133_kitchen_bottle_original.jpg"

    def wrong_id(meta, _):
        meta[name]["coco_id"] = 37777

    copy = _rewrite(release, tmp_path, wrong_id)
    assert build_cli(copy, tmp_path / "out") == 2
    assert (
        f"({name}): coco_id 37777 in the metadata contradicts the file name's '000000397133'" in capsys.readouterr().err
    )


# -- whole runs through the harness ------------------------------------------------------


@pytest.mark.e2e
def test_scene_blind_evaluates_the_authors_release_through_the_harness(run_lmms_eval, built, tiny_clip):
    include = built / "tasks"
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "cooco_authors,cooco_noise_authors"],
        env={"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)},
        include=include,
    )
    assert code == 0, log[-3000:]
    expected = {
        "release_rows": 24,
        "evaluated": 19,
        "skipped_excluded": 1,
        "skipped_clean": 4,
        "clean_included": False,
        "reading": "cleaned",
    }
    for task, n in (("cooco_authors", 19), ("cooco_noise_authors", 19 * 6)):
        report = results["results"][task]["cooco_breakdown,none"]
        assert report["n_rows"] == n and report["output_statistics"]["n_unscored"] == 0
        assert report["selection"] == expected
        rows = [s["cooco_breakdown"] for s in find_samples(out, task)]
        assert len(rows) == n and all(r["selection"] == expected for r in rows)
        assert {r["scene"] for r in rows} == {"kitchen", "cubicle/office", "market/outdoor", "bathroom"}
        assert "bat (sports)" in {r["gold"] for r in rows}
        assert not any(r["image_id"] == Path(EXCLUDED).stem for r in rows)
        assert all(r["condition"] != "clean" for r in rows)
        # every headline mean is the mean of its field over the logged rows
        values = [r["accuracy"] for r in rows if r["accuracy"] is not None]
        assert results["results"][task]["accuracy,none"] == pytest.approx(sum(values) / len(values), abs=1e-9)
    # the blind prior answers from the scene label as the metadata spells it
    answers = {
        r["cooco_breakdown"]["scene"]: r["cooco_breakdown"]["prediction"] for r in find_samples(out, "cooco_authors")
    }
    from lmms_scene.baselines.cooco import blind_answer
    from lmms_scene.metrics.cooco.scoring import normalise_output

    assert answers["cubicle/office"] == normalise_output(blind_answer({"scene": "cubicle/office"}, ""))
    # lmms-scene show says what was left out
    from lmms_scene.report.text import show_text

    text, _ = show_text([out])
    flat = " ".join(text.split())  # notes are wrapped to the terminal width
    assert (
        "Selection: scene_blind: 19 of 24 release rows evaluated; left out 1 excluded rows and 4 clean images" in flat
    )


@pytest.mark.e2e
def test_clean_images_on_request_are_scored_against_the_removed_target(run_lmms_eval, built, tiny_clip):
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "cooco_authors"],
        env={"LMMS_SCENE_CLIP_MODEL": str(tiny_clip), "LMMS_SCENE_COOCO_CLEAN": "include"},
        include=built / "tasks",
    )
    assert code == 0, log[-3000:]
    res = results["results"]["cooco_authors"]
    report = res["cooco_breakdown,none"]
    assert report["n_rows"] == 23 and report["selection"]["clean_included"] is True
    assert report["by_condition"]["clean"]["n"] == 4 and report["overall"]["n"] == 19
    rows = [s["cooco_breakdown"] for s in find_samples(out, "cooco_authors")]
    clean = [r for r in rows if r["condition"] == "clean"]
    assert sorted(r["gold"] for r in clean) == ["bottle", "potted plant", "stop sign", "toilet"]
    naming_rows = [r["accuracy"] for r in rows if r["condition"] != "clean"]
    assert res["accuracy,none"] == pytest.approx(sum(naming_rows) / len(naming_rows), abs=1e-9)


@pytest.mark.e2e
def test_an_unknown_hub_layout_stops_the_run_before_anything_is_generated(run_lmms_eval, release, built, tmp_path):
    # the local build's tasks, pointed at a dataset in a layout lmms-scene does not know
    copy = tmp_path / "unknown"
    shutil.copytree(built, copy)
    data = copy / "data" / "test-00000-of-00001.parquet"
    hub_dataset(release).rename_column("target_bbox", "bbox").to_parquet(str(data))
    record = tmp_path / "echo.jsonl"
    code, _results, _out, log = run_lmms_eval(
        ["--model", "echo", "--model_args", f"record={record}", "--tasks", "cooco_authors"],
        env={"LMMS_SCENE_CLIP_MODEL": "none"},
        include=copy / "tasks",
    )
    assert code != 0
    assert "unknown COOCO source columns ['bbox']" in log and "--column-map bbox=target_bbox" in log
    assert not record.exists(), "the model answered although the data could not be read"
