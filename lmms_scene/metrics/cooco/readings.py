"""How a COOCO answer and its gold are read before they are scored: the two readings.

``cleaned`` (the default) is ours: :func:`normalise_output` (cut at the first end-of-turn
marker, full stops dropped, lower case, a leading "a"/"an" dropped), parentheticals
stripped from the gold (:func:`gold_name`), the long caption form CLIP scores
(:func:`long_form`). ``authors`` reproduces the inputs of the authors' evaluation
(``authors_*``, :func:`jpeg_round_trip`). :func:`_texts` gives what each metric of one
answer compares in a reading; :mod:`lmms_scene.metrics.cooco.scoring` scores them.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image
from rapidfuzz import fuzz

from lmms_scene.data.cooco.schema import AUTHORS as AUTHORS
from lmms_scene.data.cooco.schema import CLEANED as CLEANED
from lmms_scene.data.cooco.schema import READINGS as READINGS
from lmms_scene.data.cooco.schema import reading_of as reading_of
from lmms_scene.metrics import clip as clip_metrics

NORMALISER_VERSION = "cooco-normalise-2"


#: the answer text of the authors' reading (scoring.authors_output / authors_hard_text)
AUTHORS_NORMALISER = "authors-evaluate.py: lstrip, lower, leading a/an dropped; Levenshtein: <|im_end|> and '.' dropped"


# End-of-turn markers that leak into decoded outputs of the model families COOCO uses:
# the answer ends at the first one.
_END_OF_TURN = re.compile(
    r"<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|end\|>|<end_of_turn>|</s>|<\|end_of_text\|>|<eos>"
)


# Markers that open the model's turn (an echoed prompt tail): dropped, the answer follows.
_START_OF_TURN = re.compile(r"<\|assistant\|>|\[/INST\]")


_ARTICLE = re.compile(r"^(?:a|an)\s+")


def normalise_label(label: str) -> str:
    """A dataset label as a name: underscores to spaces, lower case, single spaces."""
    return " ".join(str(label).replace("_", " ").lower().split())


def normalise_output(text: str | None) -> str:
    """A model answer as a bare name (authors' normalisation, made explicit).

    Cuts the text at the first end-of-turn marker (whatever follows it is not part of
    the answer), drops every full stop, lower-cases, removes a leading "a "/"an " and
    collapses white space. Unicode is NFKC-normalised and otherwise kept: a
    non-English answer is scored as it is.

    >>> normalise_output("  A Laptop.<|im_end|>")
    'laptop'
    """
    if text is None:
        return ""
    text = unicodedata.normalize("NFKC", str(text))
    marker = _END_OF_TURN.search(text)
    if marker is not None:
        text = text[: marker.start()]
    text = _START_OF_TURN.sub(" ", text)
    # Merlo et al. (2025), Section 4.3: full stops are dropped (all of them).
    text = text.replace(".", "")
    text = " ".join(text.split()).lower()
    text = _ARTICLE.sub("", text)
    return text.strip()


def article(name: str) -> str:
    return "an" if name[:1] in "aeiou" and name else "a"


def long_form(name: str) -> str:
    """``"A photo depicts a/an {name}"``, the caption form CLIP scores (Hessel et al. 2021)."""
    name = name.strip()
    return f"A photo depicts {article(name)} {name}".rstrip()


def levenshtein_similarity(a: str, b: str) -> float:
    """Normalised Indel similarity in [0, 1] (rapidfuzz ``fuzz.ratio`` / 100)."""
    return fuzz.ratio(a, b) / 100.0


#: the authors' code gives CLIP the whole text; over this many tokens its CLIP raises and
#: the row is skipped
AUTHORS_MAX_CLIP_TOKENS = 77


#: what the authors' quality default gives the RefCLIPScore crop (PIL's JPEG default)
AUTHORS_JPEG_QUALITY = 75


_PARENTHETICAL = re.compile(r" \([^)]*\)")


def gold_name(label: str) -> str:
    """A gold label as a name a model can say: every parenthetical ``" (...)"`` dropped
    (THINGSplus homonym marks such as ``bat (sports)``, ``mouse (computer)``), white space
    collapsed. The authors strip them the same way before their Levenshtein comparison.

    >>> gold_name("bat (sports)")
    'bat'
    """
    return " ".join(_PARENTHETICAL.sub("", str(label)).split())


def authors_output(text: str | None) -> str:
    """The answer as the authors' ``evaluate.py`` keeps it: leading white space stripped,
    lower-cased, one leading "a " / "an " dropped; nothing else (full stops and end-of-turn
    markers stay, and so does trailing white space).

    >>> authors_output("  A Cup.<|im_end|>")
    'cup.<|im_end|>'
    """
    out = ("" if text is None else str(text)).lstrip().lower()
    if out.startswith("a "):
        return out[2:]
    if out.startswith("an "):
        return out[3:]
    return out


def authors_long_form(name: str) -> str:
    """``"A photo depicts a/an {name}"`` exactly as the authors build it: the article from
    the first character of ``name`` as it is, ``name`` not stripped."""
    return "A photo depicts " + ("an " if name[:1] in ("a", "e", "i", "o", "u") else "a ") + name


def authors_hard_text(output: str) -> str:
    """The authors' ``output_clean`` for the Levenshtein accuracy: their kept answer
    without ``<|im_end|>`` and without full stops, lower-cased."""
    return output.replace("<|im_end|>", "").replace(".", "").lower()


def authors_hard_gold(gold: str) -> str:
    """The authors' ``target_clean``: their gold spelling without ``" (...)"``, lower-cased
    (their white space kept)."""
    return _PARENTHETICAL.sub("", gold).lower()


def jpeg_round_trip(image, quality: int = AUTHORS_JPEG_QUALITY):
    """``image`` saved as a JPEG (PIL's defaults, quality 75) and read back, as the
    authors' evaluation does with every RefCLIPScore crop before CLIP sees it."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=quality)
    buffer.seek(0)
    with Image.open(buffer) as reread:
        return reread.convert("RGB")


def clip_token_counts(texts: Sequence[str], model: str | None = None) -> list[int]:
    """How many tokens the CLIP tokenizer gives each text, untruncated (special tokens
    included): what decides whether the authors' CLIP call fails."""
    enc = clip_metrics.encoder(model)
    return [len(ids) for ids in enc.tokenizer(list(texts), truncation=False)["input_ids"]]


def _texts(item: Mapping[str, Any], raw: str, reading: str) -> dict[str, Any]:
    """What each metric of one answer compares, in ``reading``: the prediction, the long
    forms CLIP embeds (answer, gold, scene, original target) and the Levenshtein pair."""
    if reading == AUTHORS:
        out = authors_output(raw)
        gold = str(item.get("gold_spelling") or item["gold"])
        lev_pred, lev_gold = authors_hard_text(out), authors_hard_gold(gold)
        return {
            "prediction": out,
            "gold_name": lev_gold,
            "empty": out == "",
            "long": authors_long_form(out) if out else "",
            "gold_long": authors_long_form(gold),
            "scene_long": authors_long_form(str(item["scene"]).replace("_", " ")),
            "target_long": authors_long_form(str(item.get("target_spelling") or item["target"]).replace("_", " ")),
            "lev": (lev_pred, lev_gold),
            "hard_chars": len(lev_pred),
            "gold_chars": len(lev_gold),
        }
    prediction = normalise_output(raw)
    name = gold_name(normalise_label(item["gold"]))
    return {
        "prediction": prediction,
        "gold_name": name,
        "empty": prediction == "",
        "long": long_form(prediction),
        "gold_long": long_form(name),
        "scene_long": long_form(normalise_label(item["scene"])),
        "target_long": long_form(gold_name(normalise_label(item["target"]))),
        "lev": (prediction, name),
    }
