"""How large each difference between COOCO's two readings is on the tiny_coco fixture
(the table in docs/cooco.md, "The two readings").

    python bench/bench_cooco_readings.py ../shared/fixtures/tiny_coco

Builds the release of tests/test_cooco_release.py (real COCO images in the authors'
format), answers it with tests/test_cooco_parity.py's answers, and scores it with the
independent re-implementation of the authors' pipeline (tests/cooco_reference.py) under
their reading, then with each documented difference of lmms-scene's default reading
switched alone. CLIP is a tiny random checkpoint (no CLIP weights can be downloaded
here): row counts and Levenshtein figures are the fixture's, cosine sizes only show
that a difference moves the numbers. Also counts the fixture's COCO boxes whose crop
moves when the box is stored as float32.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

SWITCHES = {
    "text": "answer text: full stop and <|im_end|> kept for CLIP (authors) / dropped (cleaned)",
    "clip_gold": "CLIP gold: 'bat (sports)', 'baseball ' (authors) / 'bat', 'baseball' (cleaned)",
    "lev": "Levenshtein pair: their output_clean / target_clean vs ours",
    "crop": "RefCLIPScore crop: JPEG quality 75 round trip (authors) / exact pixels (cleaned)",
    "selection": "rows: empty and over-77-token answers skipped, long answers out of hard accuracy (authors) / kept (cleaned)",
}


def float32_boxes(fixture: Path) -> tuple[int, int]:
    """(boxes whose crop or noise region moves when stored as float32, boxes), over every
    annotation of the fixture's instance files, each moved onto its grey square."""
    import numpy as np

    from lmms_scene import imaging

    moved = total = 0
    for name in ("instances_val2017.json", "instances_train2017.json"):
        data = json.loads((fixture / "annotations" / name).read_text())
        sizes = {im["id"]: (im["width"], im["height"]) for im in data["images"]}
        for ann in data["annotations"]:
            width, height = sizes[ann["image_id"]]
            side, dx, dy = imaging.pad_offsets(width, height)
            x, y, w, h = ann["bbox"]
            box64 = (x + dx, y + dy, w, h)
            x32, y32, w32, h32 = (float(np.float32(v)) for v in ann["bbox"])
            box32 = (x32 + dx, y32 + dy, w32, h32)
            total += 1
            try:
                a = imaging.crop_pixels(box64, (side, side)), imaging.box_pixels(box64, (side, side))
                b = imaging.crop_pixels(box32, (side, side)), imaging.box_pixels(box32, (side, side))
            except ValueError:
                continue
            moved += a != b
    return moved, total


def main(fixture: Path) -> None:
    import cooco_reference as ref
    from kit import build_tiny_clip
    from test_cooco_parity import SETTINGS, answers_for
    from test_cooco_release import write_release

    with tempfile.TemporaryDirectory() as tmp:
        folder, metadata = write_release(Path(tmp) / "COOCO")
        answers = {}
        for i, (name, area, level) in enumerate(ref.answer_keys(metadata, SETTINGS)):
            meta = metadata[name]
            gold = (meta["target"] if name.endswith("_original.jpg") else meta["swapped_object"] or "").replace(
                "_", " "
            )
            answers[(name, area, level)] = answers_for(gold, i)
        clip = ref.Clip(build_tiny_clip(Path(tmp) / "clip"))
        base = ref.score(folder, metadata, answers, clip, ref.AUTHORS)
        n_answers = sum(
            1 for (name, _, _) in answers if not metadata[name]["excluded"] and not name.endswith("_clean.jpg")
        )
        kept = base["rows"]
        print(
            f"fixture {fixture} (tiny_coco, {len(metadata)} release rows); {n_answers} answered naming rows; tiny random CLIP"
        )
        print(
            f"authors' reading keeps {len(kept)} rows: skipped {sum(v == 'empty' for v in base['skipped'].values())} empty, "
            f"{sum(v == 'over_77_clip_tokens' for v in base['skipped'].values())} over 77 CLIP tokens; hard accuracy over "
            f"{sum(r['hard_chars'] <= base['longest_gold'] for r in kept.values())} of them (longest gold "
            f"{base['longest_gold']} characters)"
        )
        for switch, what in SWITCHES.items():
            one = ref.score(
                folder,
                metadata,
                answers,
                clip,
                dataclasses.replace(ref.AUTHORS, **{switch: getattr(ref.CLEANED, switch)}),
            )
            common = set(one["rows"]) & set(kept)
            lev = sum(one["rows"][k]["levenshtein_accuracy"] != kept[k]["levenshtein_accuracy"] for k in common)
            acc = sum(one["rows"][k]["accuracy"] != kept[k]["accuracy"] for k in common)
            cos = max(
                (abs((one["rows"][k]["text_similarity"] or 0) - (kept[k]["text_similarity"] or 0)) for k in common),
                default=0,
            )
            ref_d = max((abs(one["rows"][k]["refclipscore"] - kept[k]["refclipscore"]) for k in common), default=0)
            rows_changed = len(set(one["rows"]) ^ set(kept))
            print(
                f"- {switch}: {what}\n    rows added/removed {rows_changed}; of {len(common)} common rows: "
                f"Levenshtein-accuracy flips {lev}, accuracy flips {acc}, max |d text cosine| {cos:.3f}, "
                f"max |d RefCLIPScore| {ref_d:.4f}"
            )
        gaps = [abs(c["refclipscore"] - c["refclipscore_median"]) for c in base["cells"].values()]
        print(
            f"- median vs mean RefCLIPScore per cell (authors' reading): max gap {max(gaps):.4f} over {len(gaps)} cells"
        )
    moved, total = float32_boxes(fixture)
    print(
        f"- float32 boxes: {moved} of {total} COCO boxes of the fixture's annotations ({100 * moved / total:.1f} %) "
        "move a crop edge or the noise region by a pixel"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else REPO.parent / "shared" / "fixtures" / "tiny_coco"))
