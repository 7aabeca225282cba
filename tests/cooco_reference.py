"""An independent re-implementation of how the COOCO authors computed their numbers, for
the parity test (tests/test_cooco_parity.py) and the measured differences in docs/cooco.md.

Written from the paper (Merlo et al. 2025, Section 4.3 and Figure 3) and a reading of the
authors' evaluation code (filippo-merlo/multimodels_REG_eval: ``scripts/evaluate.py``,
``utils.py``, ``metrics.py``; ``data_analysis/analysis.py`` and
``att_deployment_analysis.py``), not copied from it and sharing no code with
lmms-scene's scorer: it reads the release folder and the metadata JSON itself, pads and
crops with PIL, writes the crop to a real ``.jpg`` file and reads it back, calls CLIP one
text at a time through ``CLIPProcessor``, and computes the Levenshtein (Indel) ratio
with its own longest-common-subsequence table.

What their pipeline does, step by step (each step is a switch of :class:`Reading`, so
that the documented differences of lmms-scene's default reading can be applied one at a
time):

1. gold: the metadata's ``target`` (originals) or ``swapped_object``, ``_`` read as a
   space, nothing else (``baseball_`` -> ``"baseball "``);
2. answer: leading white space stripped, lower-cased, one leading "a "/"an " dropped;
   ``output[0]`` on an empty answer raises and the row is skipped;
3. long forms ``"A photo depicts a/an X"`` (article from X's first character), embedded
   by CLIP without truncation: a text over 77 tokens raises and the row is skipped;
4. the crop of the grey-padded image (PIL ``crop`` of the float box), saved as a JPEG
   (PIL defaults) and read back;
5. RefCLIP-S = harmonic mean of 2.5 max(cos(image, answer), 0) and cos(answer, gold), 0
   unless both are positive; text similarity cos(answer, gold); accuracy >= 0.9;
   output-scene similarity cos(long answer, long scene);
6. hard accuracy: Indel ratio(answer without ``<|im_end|>`` and ``.``, gold without
   ``" (...)"``) >= 0.55, averaged only over answers no longer than the longest gold;
7. Figure 3: the median RefCLIP-S per condition at noise level 0.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PREFIX = "A photo depicts "
ACCURACY = 0.9
HARD = 0.55
CLIP_TOKENS = 77


@dataclasses.dataclass(frozen=True)
class Reading:
    """Which inputs the reference gives its formulas. ``Reading()`` is the authors';
    each switch set to its other value is one documented difference of lmms-scene's
    default reading."""

    #: "authors": their answer text (stripped, lower-cased, article dropped, nothing
    #: else); "cleaned": lmms-scene's (cut at an end-of-turn marker, full stops dropped,
    #: white space collapsed)
    text: str = "authors"
    #: gold for CLIP: "authors" keeps " (...)" and their spelling; "name" drops " (...)"
    clip_gold: str = "authors"
    #: the Levenshtein pair: "authors" (their output_clean / target_clean) or "name"
    lev: str = "authors"
    #: the crop: "jpeg" (saved and read back) or "exact"
    crop: str = "jpeg"
    #: rows: "authors" (empty and over-77-token answers skipped, long answers out of the
    #: hard accuracy) or "keep" (empty scored 0, long texts cut to 77 tokens, all kept)
    selection: str = "authors"


AUTHORS = Reading()
#: lmms-scene's default reading, as docs/cooco.md describes it
CLEANED = Reading(text="cleaned", clip_gold="name", lev="name", crop="exact", selection="keep")


def without_parenthetical(text: str) -> str:
    return re.sub(r" \([^)]*\)", "", text)


def indel_ratio(a: str, b: str) -> float:
    """1 - Indel distance / (len a + len b) = 2 LCS / (len a + len b)."""
    if not a and not b:
        return 1.0
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[j - 1]))
        previous = current
    return 2 * previous[-1] / (len(a) + len(b))


def authors_answer(raw: str) -> str:
    out = raw.lstrip().lower()
    for article in ("a ", "an "):
        if out.startswith(article):
            return out[len(article) :]
    return out


def cleaned_answer(raw: str) -> str:
    """lmms-scene's normalisation as docs/cooco.md states it (NFKC, cut at the first
    end-of-turn marker, drop turn openers and every full stop, collapse white space,
    lower-case, drop a leading a/an)."""
    import unicodedata

    text = unicodedata.normalize("NFKC", raw)
    cut = re.search(
        r"<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|end\|>|<end_of_turn>|</s>|<\|end_of_text\|>|<eos>", text
    )
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"<\|assistant\|>|\[/INST\]", " ", text).replace(".", "")
    text = " ".join(text.split()).lower()
    return re.sub(r"^(?:a|an)\s+", "", text).strip()


def long_form(name: str) -> str:
    return PREFIX + ("an " if name[:1] in "aeiou" and name else "a ") + name


class Clip:
    """CLIP through ``CLIPModel`` / ``CLIPProcessor``, one input at a time."""

    def __init__(self, folder: Path):
        import torch
        from transformers import CLIPModel, CLIPProcessor

        self.torch = torch
        self.model = CLIPModel.from_pretrained(str(folder)).eval()
        self.processor = CLIPProcessor.from_pretrained(str(folder))

    @staticmethod
    def _unit(x):
        x = getattr(x, "pooler_output", x)
        return x / x.norm(dim=-1, keepdim=True)

    def text(self, text: str, truncate: bool):
        if truncate:
            batch = self.processor(
                text=[text], return_tensors="pt", padding=True, truncation=True, max_length=CLIP_TOKENS
            )
        else:
            batch = self.processor(text=[text], return_tensors="pt", padding=True)
            if batch["input_ids"].shape[1] > CLIP_TOKENS:
                raise ValueError(f"{batch['input_ids'].shape[1]} tokens: CLIP's positions end at {CLIP_TOKENS}")
        with self.torch.no_grad():
            return self._unit(
                self.model.get_text_features(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            )

    def image(self, image):
        batch = self.processor(images=image, return_tensors="pt")
        with self.torch.no_grad():
            return self._unit(self.model.get_image_features(pixel_values=batch["pixel_values"]))

    def cos(self, a, b) -> float:
        return float(self.torch.nn.functional.cosine_similarity(a, b, dim=1).item())


def _find(folder: Path, name: str) -> Path:
    direct = folder / name
    return direct if direct.exists() else next(folder.rglob(name))


def padded_crop(path: Path, box, crop: str, scratch: Path):
    from PIL import Image

    with Image.open(path) as opened:
        image = opened.convert("RGB")
    side = max(image.size)
    dx, dy = (side - image.size[0]) // 2, (side - image.size[1]) // 2
    canvas = Image.new("RGB", (side, side), (128, 128, 128))
    canvas.paste(image, (dx, dy))
    x, y, w, h = box
    x, y = x + dx, y + dy
    patch = canvas.crop((x, y, x + w, y + h))
    if crop == "exact":
        return patch
    file = scratch / f"patch_{path.name}"
    if file.suffix != ".jpg":
        file = file.with_suffix(".jpg")
    patch.save(file)  # PIL's JPEG defaults (quality 75)
    return Image.open(file)


def condition_of(name: str) -> str:
    for suffix, condition in (
        ("_original.jpg", "original"),
        ("_clean.jpg", "clean"),
        ("_relscore_same_target.jpg", "same_target"),
        ("_relscore_high.jpg", "high"),
        ("_relscore_middle.jpg", "medium"),
        ("_relscore_low.jpg", "low"),
    ):
        if name.endswith(suffix):
            return condition
    raise ValueError(name)


def score(
    folder: Path,
    metadata: Mapping[str, Mapping[str, Any]],
    answers: Mapping[tuple, str],
    clip: Clip,
    reading: Reading = AUTHORS,
) -> dict[str, Any]:
    """Score ``answers`` (``(file name, noise area, noise level) -> raw answer``) as the
    authors' pipeline does under ``reading``. Returns the kept rows by key, the skipped
    keys with their reason, the longest gold and the per-cell aggregates."""
    rows: dict[tuple, dict[str, Any]] = {}
    skipped: dict[tuple, str] = {}
    images: dict[str, Any] = {}  # one crop per image: the noise settings share it
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for key, raw in answers.items():
            name, area, level = key
            meta = metadata[name]
            condition = condition_of(name)
            if meta["excluded"] or condition == "clean":
                continue
            gold = (meta["target"] if condition == "original" else meta["swapped_object"]).replace("_", " ")
            if reading.text == "authors":
                output = authors_answer(raw)
            else:
                output = cleaned_answer(raw)
            name_gold = " ".join(without_parenthetical(gold).split()).lower()
            clip_gold = gold if reading.clip_gold == "authors" else name_gold
            if output == "":
                if reading.selection == "authors":
                    skipped[key] = "empty"  # output[0] raises
                    continue
                rows[key] = {
                    "condition": condition,
                    "area": area,
                    "level": level,
                    "refclipscore": 0.0,
                    "accuracy": 0.0,
                    "text_similarity": None,
                    "output_scene_similarity": None,
                    "levenshtein_accuracy": 0.0,
                    "hard_chars": 0,
                    "gold_chars": len(name_gold),
                }
                continue
            truncate = reading.selection != "authors"
            try:
                out_emb = clip.text(long_form(output), truncate)
            except ValueError:
                skipped[key] = "over_77_clip_tokens"
                continue
            gold_emb = clip.text(long_form(clip_gold), truncate)
            scene_emb = clip.text(long_form(meta["scene"].replace("_", " ")), truncate)
            if name not in images:
                images[name] = clip.image(padded_crop(_find(folder, name), meta["target_bbox"], reading.crop, scratch))
            image_emb = images[name]
            clip_s = 2.5 * max(clip.cos(image_emb, out_emb), 0.0)
            ref = clip.cos(out_emb, gold_emb)
            refclip = 2 * clip_s * ref / (clip_s + ref) if clip_s > 0 and ref > 0 else 0.0
            if reading.lev == "authors":
                hard_out = output.replace("<|im_end|>", "").replace(".", "").lower()
                hard_gold = without_parenthetical(gold).lower()
            else:
                hard_out, hard_gold = output, name_gold
            rows[key] = {
                "condition": condition,
                "area": area,
                "level": level,
                "refclipscore": refclip,
                "text_similarity": ref,
                "accuracy": float(ref >= ACCURACY),
                "output_scene_similarity": clip.cos(out_emb, scene_emb),
                "levenshtein_accuracy": float(indel_ratio(hard_out, hard_gold) >= HARD),
                "hard_chars": len(hard_out),
                "gold_chars": len(hard_gold),
            }
    longest = max((r["gold_chars"] for r in rows.values()), default=0)
    return {"rows": rows, "skipped": skipped, "longest_gold": longest, "cells": cells(rows, longest, reading)}


def cells(rows: Mapping[tuple, Mapping[str, Any]], longest: int, reading: Reading) -> dict[tuple, dict[str, Any]]:
    """Per (condition, noise area, noise level): means of every metric (None values left
    out), the median RefCLIP-S, and the hard accuracy over the answers no longer than the
    longest gold (every answer with ``selection="keep"``)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows.values():
        groups.setdefault((row["condition"], row["area"], row["level"]), []).append(row)
    out = {}
    for key, members in groups.items():
        cell: dict[str, Any] = {"n": len(members)}
        for metric in ("refclipscore", "accuracy", "text_similarity", "output_scene_similarity"):
            values = [m[metric] for m in members if m[metric] is not None]
            cell[metric] = sum(values) / len(values) if values else None
        hard = [m for m in members if reading.selection != "authors" or m["hard_chars"] <= longest]
        cell["levenshtein_accuracy"] = sum(m["levenshtein_accuracy"] for m in hard) / len(hard) if hard else None
        cell["n_hard"] = len(hard)
        cell["refclipscore_median"] = statistics.median(m["refclipscore"] for m in members)
        out[key] = cell
    return out


def load_metadata(path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(Path(path).read_text())


def answer_keys(metadata: Mapping[str, Any], settings: Iterable[tuple[str, float]]) -> list[tuple]:
    return [(name, area, level) for name in sorted(metadata) for area, level in settings]
