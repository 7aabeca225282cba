"""Layered-VQA's rule grader: typed answer extraction, read the way a careful person reads.

A reply is graded against the gold answer by the *kind* of answer the gold is (inferred
from the gold and the question type, :func:`answer_kind`): ``yes/no``, ``count`` (one
number, or several groups: "Two circles and one square"), ``relation`` (left / right /
above / below / behind / in front), ``colour``, ``shape`` or ``object`` (a noun phrase:
"The red circle.", "A teddy bear."). For that kind the grader finds every *mention* in
the reply and reads each one in its context:

* **layer numbers are not answers**: "layer 4", "layers 2 and 3", "[layer 1 of the
  scene]", "L2", a ``Layers: 1, 2`` selection line are removed before anything is read;
* **negation**: "not yellow", "It is not a triangle; it is a circle.", "Not two, there
  are three.", "rather than X", "instead of X" deny what follows (to the next clause);
* **options are not answers**: mentions joined by "or" ("it could be a circle, a square
  or a triangle"), or in a question back, are listed, not chosen;
* **restating the question**: a value the question itself names ("the red object" in
  "What colour is the other object with the same shape as the red object?") counts only
  when nothing else is said;
* **descriptions of other objects**: in "What shape is the red object?", the square of
  "a blue square" belongs to another object; in "What colour is the large triangle?",
  the colour of "the small triangle" or "a red circle" does too;
* **synonyms**: above / over / on top of; circle / round / circular; teddy bear / teddy /
  stuffed bear; WordNet noun synonyms for other objects (when installed);
* when several different answers remain, an explicit one ("the answer is", "so",
  "in total", an "Answer:" line) or the clause that restates the question decides;
  otherwise the reply has not committed;
* **the answer the reply commits to** (issue 29, measured on real VLM replies by
  ``bench/bench_real_replies.py``): for a yes/no question a stated final answer ("So the
  answer is (B), No.") decides, then an opening yes/no, then a refusal (``cannot_tell``),
  then the clause that restates the question, read with the negation that binds to the
  question's words and with comparisons or states said the other way ("the same size"
  to "larger?"); a statement that restates nothing is ``cannot_tell``. A chat echo
  ("User: ... Assistant: Yes.") is read after the last "Assistant:", a model's special
  tokens ("<s>") are dropped, and an option letter ("(B) no", "B") is read by the options
  the question lists ("(A) yes (B) no"). "The answer is (D)
  buns" names the answer and "the other choices are ..." lists options. A word that is a
  colour and an object ("orange") is a colour only when the question asks for one.

The verdict is ``correct``, ``wrong`` or ``cannot_tell`` (the reply gives no answer of
the asked kind: a refusal, options without a choice, only other answers ruled out,
several answers). ``cannot_tell`` is its own outcome, counted in every report
(``cannot_tell_rate``); for accuracy it is not a right answer.

>>> grade("Layer 4 and layer 2 each show a square, so there are two squares.", "Two.", "counting").verdict
'correct'
>>> grade("It is not a triangle; it is a circle.", "A triangle.", "direct ask").verdict
'wrong'
>>> grade("It could be a circle, a square or a triangle.", "A circle.", "direct ask").verdict
'cannot_tell'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_scene.data.layered_vqa.schema import QUESTION_TYPES
from lmms_scene.files import iter_jsonl
from lmms_scene.metrics.outputs import MAX_OUTPUT_CHARS

CORRECT, WRONG, CANNOT_TELL = "correct", "wrong", "cannot_tell"
VERDICTS = (CORRECT, WRONG, CANNOT_TELL)
KINDS = ("yes/no", "count", "relation", "colour", "shape", "object")

# -- vocabularies (closed for the attributes of generated scenes; WordNet for other nouns) --

#: colour word -> the colour it names (shades and spellings folded)
COLOUR_WORDS: dict[str, str] = {
    "red": "red",
    "crimson": "red",
    "scarlet": "red",
    "reddish": "red",
    "green": "green",
    "greenish": "green",
    "lime": "green",
    "blue": "blue",
    "bluish": "blue",
    "blueish": "blue",
    "navy": "blue",
    "yellow": "yellow",
    "yellowish": "yellow",
    "purple": "purple",
    "violet": "purple",
    "purplish": "purple",
    "magenta": "magenta",
    "orange": "orange",
    "orangish": "orange",
    "orangey": "orange",
    "black": "black",
    "white": "white",
    "grey": "grey",
    "gray": "grey",
    "silver": "grey",
    "brown": "brown",
    "pink": "pink",
    "cyan": "cyan",
    "teal": "teal",
    "turquoise": "turquoise",
    "gold": "gold",
    "golden": "gold",
    "beige": "beige",
}
#: shape word -> the shape it names
SHAPE_WORDS: dict[str, str] = {
    "circle": "circle",
    "circles": "circle",
    "circular": "circle",
    "round": "circle",
    "disc": "circle",
    "disk": "circle",
    "square": "square",
    "squares": "square",
    "squared": "square",
    "triangle": "triangle",
    "triangles": "triangle",
    "triangular": "triangle",
    "rectangle": "rectangle",
    "rectangles": "rectangle",
    "rectangular": "rectangle",
    "oval": "oval",
    "ovals": "oval",
    "ellipse": "oval",
    "star": "star",
    "stars": "star",
    "diamond": "diamond",
    "diamonds": "diamond",
    "pentagon": "pentagon",
    "hexagon": "hexagon",
    "hexagons": "hexagon",
    "heart": "heart",
    "cross": "cross",
}
SIZE_WORDS = {
    "small": "small",
    "little": "small",
    "tiny": "small",
    "smaller": "small",
    "smallest": "small",
    "large": "large",
    "big": "large",
    "larger": "large",
    "bigger": "large",
    "largest": "large",
    "biggest": "large",
}
#: multi-word object synonyms the WordNet lemma sets miss (gold head phrase -> other names)
OBJECT_SYNONYMS: dict[str, tuple[str, ...]] = {
    "teddy bear": ("teddy", "stuffed bear", "toy bear", "plush bear", "stuffed teddy", "teddy bears"),
    "mountain range": ("mountains", "mountain chain", "range of mountains", "mountain ridge", "mountain"),
    "bottle": ("bottles",),
}
#: relation phrases (longest first when matched) -> the direction they name
RELATION_PHRASES: dict[str, str] = {
    "to the left of": "left",
    "on the left of": "left",
    "on the left side of": "left",
    "left side of": "left",
    "left of": "left",
    "to its left": "left",
    "on its left": "left",
    "to the left": "left",
    "on the left": "left",
    "leftmost": "left",
    "left hand side": "left",
    "left side": "left",
    "the left": "left",
    "left": "left",
    "to the right of": "right",
    "on the right of": "right",
    "on the right side of": "right",
    "right side of": "right",
    "right of": "right",
    "to its right": "right",
    "on its right": "right",
    "to the right": "right",
    "on the right": "right",
    "rightmost": "right",
    "right hand side": "right",
    "right side": "right",
    "the right": "right",
    "right": "right",
    "above": "above",
    "over": "above",
    "on top of": "above",
    "atop": "above",
    "higher than": "above",
    "on top": "above",
    "up from": "above",
    "below": "below",
    "under": "below",
    "underneath": "below",
    "beneath": "below",
    "lower than": "below",
    "in front of": "front",
    "in front": "front",
    "before": "front",
    "at the bottom": "below",
    "at the top": "above",
    "in the lower part": "below",
    "in the upper part": "above",
    "behind": "behind",
    "in back of": "behind",
    "at the back of": "behind",
    "back of": "behind",
    "next to": "near",
    "beside": "near",
    "near": "near",
    "close to": "near",
    "adjacent to": "near",
}
OPPOSITE = {"left": "right", "right": "left", "above": "below", "below": "above", "front": "behind", "behind": "front"}
NUMBER_WORDS: dict[str, int] = {
    "zero": 0,
    "none": 0,
    "one": 1,
    "single": 1,
    "two": 2,
    "pair": 2,
    "both": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "dozen": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}
ARTICLES = {"a", "an", "the"}
STOPWORDS = ARTICLES | {
    "is",
    "are",
    "was",
    "were",
    "be",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "there",
    "of",
    "in",
    "on",
    "at",
    "to",
    "and",
    "or",
    "with",
    "by",
    "for",
    "from",
    "as",
    "what",
    "which",
    "where",
    "how",
    "many",
    "i",
    "see",
    "can",
    "object",
    "objects",
    "thing",
    "things",
    "one",
    "ones",
    "shape",
    "shapes",
    "color",
    "colour",
    "scene",
    "image",
    "picture",
    "answer",
    "visible",
    "here",
    "they",
    "them",
    "their",
    "has",
    "have",
    "appears",
    "looks",
    "seems",
}
#: words after which a number is not a count of something ("layer" is removed before)
_NEGATORS = {
    "not",
    "no",
    "never",
    "neither",
    "nor",
    "without",
    "nothing",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "doesn't",
    "don't",
    "didn't",
    "can't",
    "cannot",
    "couldn't",
    "won't",
    "hardly",
}
_NEGATING_PHRASES = (
    ("rather", "than"),
    ("instead", "of"),
    ("other", "than"),
    ("as", "opposed", "to"),
    ("except",),
    ("apart", "from"),
)
_CLAUSE_BREAK = {".", ";", "!", "?", ":", "\n", ",", "but", "however", "whereas", "while", "although", "though", "yet"}
_SENTENCE_BREAK = {".", ";", "!", "?", "\n", ":"}
_MARKERS = {
    "answer",
    "so",
    "therefore",
    "thus",
    "hence",
    "total",
    "altogether",
    "overall",
    "conclusion",
    "final",
    "making",
    "makes",
    "actually",
    "correction",
}
_REFUSAL = re.compile(
    r"\b(cannot|can't|can not|unable to|not able to|impossible to|hard to|difficult to|no way to) "
    r"(tell|say|determine|see|answer|identify|know|be sure|count|make out)|\bnot (sure|certain|clear|visible)\b|\bunclear\b|"
    r"\bi don't know\b|\bno idea\b|\bneed (more|the|another)\b|\bplease (provide|share|show|send)\b|"
    r"\bnot enough\b|\binsufficient\b|\bnot possible\b"
)
_LAYER_REF = re.compile(
    r"\[?\b(?:layers?|images?|pictures?|frames?|turns?|shards?|rounds?)\s*(?:#|no\.?|number)?\s*"
    r"(?:\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)"
    r"(?:\s*(?:,|and|&|or|-|to|through)\s*(?:layers?\s*)?(?:\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)\b)*"
    r"(?:\s+of\s+the\s+scene\])?\]?|\bl\d+\b|\b\d+(?:st|nd|rd|th)\s+layer\b"
)
_SELECTION_LINE = re.compile(r"(?im)^\s*[*_]*layers?\s*(?:needed|used)?\s*[*_]*\s*[:=].*$")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[.,;:!?\n]")


# -- tokens and mentions ---------------------------------------------------------------------


def _clean(text: str) -> str:
    text = str(text).replace("’", "'").replace("‘", "'").replace("`", "'")
    text = re.sub(r"[*_#>\"“”]+", " ", text)
    text = _SELECTION_LINE.sub(" ", text)
    text = _LAYER_REF.sub(" layerref ", text.lower())
    text = text.replace("colour", "color").replace("-", " ").replace("/", " or ")
    return text


def tokens(text: str) -> list[str]:
    """Lower-case word and punctuation tokens, layer references replaced by ``layerref``."""
    return _TOKEN.findall(_clean(text))


@dataclass
class Mention:
    """One candidate answer in a reply: its ``value``, where it is and how it is said."""

    value: Any
    start: int
    end: int
    negated: bool = False
    option: bool = False
    in_question: bool = False
    other_object: bool = False
    marked: bool = False
    clause: int = 0
    words: tuple[str, ...] = field(default_factory=tuple)

    @property
    def affirmed(self) -> bool:
        return not (self.negated or self.option or self.other_object)


def _clauses(toks: Sequence[str]) -> list[int]:
    """The clause number of each token (a new clause after , ; . : but ...)."""
    out, k = [], 0
    for t in toks:
        out.append(k)
        if t in _CLAUSE_BREAK:
            k += 1
    return out


def _sentences(toks: Sequence[str]) -> list[tuple[int, int, bool]]:
    """(start, end, is_question) of each sentence."""
    out, start = [], 0
    for i, t in enumerate(toks):
        if t in _SENTENCE_BREAK:
            out.append((start, i + 1, t == "?"))
            start = i + 1
    if start < len(toks):
        out.append((start, len(toks), False))
    return out


def _mark_context(toks: Sequence[str], mentions: list[Mention]) -> None:
    """Negation, options, question sentences and answer markers, for every mention."""
    clause = _clauses(toks)
    sentences = _sentences(toks)
    for m in mentions:
        m.clause = clause[m.start]
        # negation: a negator in the same clause at most 4 tokens before ("is not a triangle",
        # "there aren't any squares", "not two"), or "rather than" / "instead of" right before
        lo = m.start
        while lo > 0 and clause[lo - 1] == m.clause and m.start - lo < 4:
            lo -= 1
        window = list(toks[lo : m.start])
        for j, t in enumerate(window):
            if t in _NEGATORS or t.endswith("n't"):
                # "no" as an answer word ("No, it is red") is not a negator of what follows
                if t == "no" and (j + 1 < len(window) and window[j + 1] in (",", ".")):
                    continue
                m.negated = True
        for phrase in _NEGATING_PHRASES:
            n = len(phrase)
            if (
                tuple(toks[max(0, m.start - n) : m.start]) == phrase
                or tuple(toks[max(0, m.start - n - 1) : m.start - 1]) == phrase
            ):
                m.negated = True
        for s, e, question in sentences:
            if s <= m.start < e:
                if question:
                    m.option = True
                head = toks[s : m.start]
                if s >= 2 and toks[s - 1] == ":" and toks[s - 2] in ("answer", "answers"):
                    m.marked = True  # "Answer: There are 5 objects left"
                tail = toks[m.end : m.end + 4]
                if any(t in _MARKERS for t in head) or ("is" in head and "answer" in head):
                    m.marked = True
                if (
                    tail[:2] in (["in", "all"], ["in", "total"])
                    or tail[:1] == ["altogether"]
                    or tail[:2] == ["total", ","]
                ):
                    m.marked = True
    # options: a list of mentions joined by commas and "or" ("a circle, a square or a
    # triangle") is listed, not chosen; joined by "nor", or after a negation, all denied
    link = {",", "or", "nor", "either", "a", "an", "the", "maybe", "perhaps", "possibly", *COLOUR_WORDS, *SIZE_WORDS}
    chains: list[list[Mention]] = []
    for m in mentions:
        if chains and all(t in link for t in toks[chains[-1][-1].end : m.start]) and m.start - chains[-1][-1].end <= 6:
            chains[-1].append(m)
        else:
            chains.append([m])
    for chain in chains:
        joins = [t for a, b in zip(chain, chain[1:]) for t in toks[a.end : b.start]]
        if "nor" in joins or (chain[0].negated and "or" in joins):
            for m in chain:
                m.negated = True
        elif "or" in joins and len({str(m.value) for m in chain}) > 1:
            for m in chain:
                m.option = True
    # "The other choices are (A) soup, (B) rice": listed, not chosen
    for s_, e_, _q in sentences:
        window = toks[s_:e_]
        if any(
            tuple(window[k : k + 2])
            in (
                ("other", "choices"),
                ("other", "options"),
                ("other", "answers"),
                ("other", "choice"),
                ("other", "option"),
            )
            for k in range(len(window))
        ):
            for m in mentions:
                if s_ <= m.start < e_ and not m.marked:
                    m.option = True
    # "either X or Y" / "whether X or Y" at the start of a clause; "X or Y" with a word
    # the grader has no vocabulary for ("a can or a bottle", "hills or mountains")
    for m in mentions:
        if any(t in ("either", "whether") for t in toks[max(0, m.start - 3) : m.start]):
            m.option = True
        if m.negated:
            continue
        before = [t for t in toks[max(0, m.start - 3) : m.start] if clause[max(0, m.start - 1)] == m.clause]
        after = toks[m.end : m.end + 2]
        if (
            ("or" in before and "rather" not in before)
            or (after and after[0] == "or")
            or (len(after) > 1 and after[1] == "or" and after[0] not in _SENTENCE_BREAK)
        ):
            if not (after and after[0] == "or" and len(toks) > m.end + 1 and toks[m.end + 1] in ("not", "so")):
                m.option = True


# -- what the gold answer is -------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in _SENTENCE_BREAK and t != ","]


def answer_kind(gold: str, question_type: str | None = None, question: str | None = None) -> str:
    """The kind of answer ``gold`` is (see :data:`KINDS`). A word that is both a colour and
    an object ("orange", "lime") is a colour only when the question asks for one: "The
    right of the plums is oranges." answers "What is to the right of the plums?"."""
    words = _words(gold)
    if words and words[0] in ("yes", "no"):
        return "yes/no"
    if (
        question_type == "counting"
        or (words and (words[0] in NUMBER_WORDS or words[0].isdigit()))
        or (
            words[:2] in (["there", "are"], ["there", "is"])
            and len(words) > 2
            and (words[2] in NUMBER_WORDS or words[2].isdigit())
        )
    ):
        return "count"
    if question_type in (None, "spatial") and _relations(words):
        return "relation"
    content = [w for w in words if w not in STOPWORDS]
    if content and all(w in COLOUR_WORDS for w in content):
        asks_colour = question is None or "color" in tokens(question)
        if asks_colour and not (words[0] in ("a", "an") and question is not None):
            return "colour"
        return "object"
    if len(content) == 1 and content[0] in SHAPE_WORDS:
        return "shape"
    return "object"


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


# -- per-kind mention finders ------------------------------------------------------------------


def _colours(toks: Sequence[str]) -> list[Mention]:
    return [Mention(COLOUR_WORDS[t], i, i + 1, words=(t,)) for i, t in enumerate(toks) if t in COLOUR_WORDS]


def _shapes(toks: Sequence[str]) -> list[Mention]:
    out = []
    for i, t in enumerate(toks):
        if t in SHAPE_WORDS:
            # "round" / "square" as adjectives of another shape word are one mention ("square box")
            out.append(Mention(SHAPE_WORDS[t], i, i + 1, words=(t,)))
    return out


def _relations(toks: Sequence[str]) -> list[Mention]:
    phrases = sorted(RELATION_PHRASES, key=lambda p: -len(p.split()))
    out: list[Mention] = []
    i = 0
    while i < len(toks):
        for p in phrases:
            words = p.split()
            if list(toks[i : i + len(words)]) == words:
                if words in (["left"], ["right"]) and not _spatial_side(toks, i):
                    continue
                if words == ["over"] and i + 1 < len(toks) and toks[i + 1] in ("there", "here", "again"):
                    continue
                if words == ["before"]:  # "before" is about time far more often than place
                    continue
                out.append(Mention(RELATION_PHRASES[p], i, i + len(words), words=tuple(words)))
                i += len(words) - 1
                break
        i += 1
    return out


def _spatial_side(toks: Sequence[str], i: int) -> bool:
    """Whether a bare "left"/"right" names a side ("that's right" does not)."""
    prev = toks[i - 1] if i else ""
    nxt = toks[i + 1] if i + 1 < len(toks) else ""
    if prev in ("the", "its", "their", "far", "upper", "lower", "top", "bottom", "to", "on", "at", "towards", "toward"):
        return True
    if nxt in ("of", "side", "hand", "edge", "half", "corner"):
        return True
    return len([t for t in toks if t not in _SENTENCE_BREAK and t != ","]) <= 2  # the whole reply: "Left."


def _numbers(toks: Sequence[str]) -> list[Mention]:
    out = []
    for i, t in enumerate(toks):
        value = None
        if t.isdigit() and len(t) <= 3:
            value = int(t)
        elif t in NUMBER_WORDS:
            value = NUMBER_WORDS[t]
            prev = toks[i - 1] if i else ""
            nxt = toks[i + 1] if i + 1 < len(toks) else ""
            if t == "one" and (
                prev in ARTICLES | {"this", "that", "each", "which", "every", "any", "another", "other", "no"}
                or prev in COLOUR_WORDS
                or prev in SIZE_WORDS
                or nxt in ("of", "another", "by")
            ):
                continue  # "the red one", "one of the squares": a pronoun, not a count
            if t == "single" and prev not in ARTICLES:
                continue
            if t == "pair" and nxt != "of":
                continue
        elif t == "no" and i + 1 < len(toks) and toks[i + 1] not in _SENTENCE_BREAK | {","}:
            # "no squares": zero of them (a determiner, not the answer word "No,")
            nxt = toks[i + 1]
            if nxt in ("more", "other", "longer", "idea", "way", "doubt"):
                continue
            value = 0
        if value is None:
            continue
        out.append(Mention(value, i, i + 1, words=(t,)))
    # a count's noun: the first word after it that is not an adjective
    for m in out:
        noun = None
        for tok in toks[m.end : m.end + 4]:
            if tok in _SENTENCE_BREAK or tok == ",":
                break
            if (
                tok in ARTICLES
                or tok in COLOUR_WORDS
                or tok in SIZE_WORDS
                or tok
                in ("of", "more", "distinct", "different", "separate", "visible", "total", "in", "all", "other", "such")
            ):
                continue
            noun = _singular(SHAPE_WORDS.get(tok, tok)) if tok in SHAPE_WORDS else _singular(tok)
            break
        m.words = (*m.words, noun or "")
    # "one layer", "five layers", "two images": about the delivery, not the scene
    return [
        m
        for m in out
        if m.words[-1]
        not in ("layer", "layerref", "image", "turn", "picture", "step", "part", "round", "shard", "frame")
    ]


def _object_mentions(toks: Sequence[str], heads: dict[str, str]) -> list[Mention]:
    """Mentions of nouns in ``heads`` (a phrase of the reply -> the object it names),
    longest phrases first, with the colour just before them (``value = (colour, object)``)."""
    phrases = sorted(heads, key=lambda p: -len(p.split()))
    out: list[Mention] = []
    i = 0
    while i < len(toks):
        for p in phrases:
            words = p.split()
            if [_singular(t) for t in toks[i : i + len(words)]] == [_singular(w) for w in words]:
                colour = None
                for tok in reversed(toks[max(0, i - 3) : i]):
                    if tok in COLOUR_WORDS:
                        colour = COLOUR_WORDS[tok]
                        break
                    if tok in _SENTENCE_BREAK or tok in (",", "of", "is", "are") or tok in _NEGATORS:
                        break
                if colour is None:  # "the circle that is red", "the circle is red"
                    after = toks[i + len(words) : i + len(words) + 4]
                    for k, tok in enumerate(after):
                        if tok in _SENTENCE_BREAK or tok == ",":
                            break
                        if tok in COLOUR_WORDS and any(
                            a in ("is", "that", "which", "coloured", "colored") for a in after[:k]
                        ):
                            colour = COLOUR_WORDS[tok]
                            break
                out.append(Mention((colour, heads[p]), i, i + len(words), words=tuple(words)))
                i += len(words) - 1
                break
        i += 1
    return out


# -- the verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grade:
    """The grader's verdict on one reply: ``verdict`` (correct / wrong / cannot_tell),
    the ``reason`` in words, the answer ``kind`` and what it read as the reply's answer."""

    verdict: str
    reason: str
    kind: str = ""
    answer: Any = None

    @property
    def correct(self) -> bool:
        """For accuracy: only a correct verdict is a right answer."""
        return self.verdict == CORRECT

    @property
    def cannot_tell(self) -> bool:
        return self.verdict == CANNOT_TELL

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "kind": self.kind, "answer": self.answer}


def _choose(toks, mentions: list[Mention], question_toks: set[str], q_tokens: Sequence[str]) -> tuple[Any, str] | None:
    """The value the reply commits to, or None with why (several / none)."""
    affirmed = [m for m in mentions if m.affirmed]
    if not affirmed:
        return None
    # a value the question names counts only when nothing else is said
    fresh = [m for m in affirmed if not m.in_question]
    pool = fresh or affirmed
    values = {m.value for m in pool}
    if len(values) == 1:
        return pool[0].value, "one answer"
    marked = [m for m in pool if m.marked]
    if marked and len({m.value for m in marked}) == 1:
        return marked[-1].value, "the stated answer"
    if marked:
        last = max(m.clause for m in marked)
        in_last = [m for m in marked if m.clause == last]
        if len({m.value for m in in_last}) == 1:
            return in_last[0].value, "the last stated answer"
    if question_toks:
        # the clause that restates the question most holds the answer
        clause_of = _clauses(toks)
        content_q = {t for t in question_toks if t not in STOPWORDS and t not in _SENTENCE_BREAK}
        by_clause: dict[int, list[Mention]] = {}
        for m in pool:
            by_clause.setdefault(m.clause, []).append(m)
        overlaps = []
        for c, ms in by_clause.items():
            words = {t for t, k in zip(toks, clause_of) if k == c} - {w for m in ms for w in m.words}
            overlaps.append((len(words & content_q), c))
        overlaps.sort(reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[0][0] > overlaps[1][0]):
            best = by_clause[overlaps[0][1]]
            if len({m.value for m in best}) == 1:
                return best[0].value, "the clause that restates the question"
    return None


def _no_answer_reason(mentions: list[Mention], text: str, kind: str) -> str:
    if any(m.option and not m.negated and not m.in_question for m in mentions):
        return "lists options without choosing one"
    if _REFUSAL.search(text):
        return "says it cannot tell"
    if any(m.negated for m in mentions):
        return "only rules answers out"
    if any(m.other_object for m in mentions):
        return f"names only other objects' {kind}"
    return f"no {kind} in the reply"


def _bigrams(toks: Sequence[str]) -> set[tuple[str, str]]:
    words = [t for t in toks if t not in ARTICLES]
    return set(zip(words, words[1:]))


def _in_question(mentions: list[Mention], q_values: set, toks: Sequence[str] = (), qtoks: Sequence[str] = ()) -> None:
    """Mark mentions of values the question names. A mention said in the question's own
    words (with a neighbour word, as in "the yellow object") restates it and is no answer
    at all (``option``); a bare mention of such a value ("Red.") is an answer only when
    nothing else is said (``in_question``)."""
    q_pairs = _bigrams(qtoks)
    for m in mentions:
        if m.value not in q_values:
            continue
        m.in_question = True
        if not q_pairs or m.marked:  # "The answer is (D) buns": the chosen option, not the question restated
            continue
        prev = next((t for t in reversed(toks[: m.start]) if t not in ARTICLES), None)
        nxt = next((t for t in toks[m.end :] if t not in ARTICLES), None)
        first, last = toks[m.start], toks[m.end - 1]
        if (prev, first) in q_pairs or (last, nxt) in q_pairs:
            if not _bare(toks, m):
                m.option = True  # restates the question: neither for nor against


def _bare(toks: Sequence[str], m: Mention) -> bool:
    """Whether the mention (with its modifiers) is the whole sentence it stands in ("The
    green square."): then it is the reply's answer, even if the question names it."""
    s = m.start
    while s > 0 and toks[s - 1] not in _SENTENCE_BREAK:
        s -= 1
    e = m.end
    while e < len(toks) and toks[e] not in _SENTENCE_BREAK:
        e += 1
    rest = [t for t in toks[s : m.start] + toks[m.end : e] if t not in ARTICLES and t != ","]
    return all(t in COLOUR_WORDS or t in SIZE_WORDS or t in ("it", "is", "it's") for t in rest)


def _target_descriptors(question: str | None) -> tuple[set[str], set[str], set[str]]:
    """(colours, shapes, sizes) the question names its target by (before any reference
    phrase such as "relative to", "behind", "as the")."""
    if not question:
        return set(), set(), set()
    toks = tokens(question)
    cut = len(toks)
    for k, t in enumerate(toks):
        if t in ("as", "than", "behind", "relative", "next", "near", "beside", "of") and k > 2:
            cut = k
            break
    head = toks[:cut]
    return (
        {COLOUR_WORDS[t] for t in head if t in COLOUR_WORDS},
        {SHAPE_WORDS[t] for t in head if t in SHAPE_WORDS},
        {SIZE_WORDS[t] for t in head if t in SIZE_WORDS},
    )


def _bound_descriptors(toks: Sequence[str], m: Mention) -> tuple[set[str], set[str], set[str]]:
    """(colours, shapes, sizes) describing the object a mention belongs to: the words just
    before it ("a blue square"), just after it ("red circle") and, for "X is <mention>",
    the subject X of its clause."""
    clause = _clauses(toks)
    near = [t for t in toks[max(0, m.start - 3) : m.start] if clause[m.start] == clause[min(len(toks) - 1, m.start)]]
    # stop at a verb or a determiner boundary going back
    pre: list[str] = []
    for t in reversed(near):
        if t in _SENTENCE_BREAK or t in (",", "is", "are", "of", "and", "or") or t in _NEGATORS:
            break
        pre.insert(0, t)
    post = []
    for t in toks[m.end : m.end + 2]:
        if t in SHAPE_WORDS or t in SIZE_WORDS or t in ("object", "one", "shape", "thing"):
            post.append(t)
        else:
            break
    subject: list[str] = []
    j = m.start - 1
    while j >= 0 and (
        toks[j] in ARTICLES
        or toks[j] in ("probably", "likely", "definitely", "clearly", "also", "to", "be", "colored", "shaped")
    ):
        j -= 1
    if j >= 0 and toks[j] in ("is", "are", "looks", "appears", "seems", "'s") and clause[j] == clause[m.start]:
        k = j - 1
        while (
            k >= 0
            and clause[k] == clause[j]
            and toks[k] not in _SENTENCE_BREAK
            and toks[k] not in ("and", "is", "are", "while", "whereas")
        ):
            subject.insert(0, toks[k])
            k -= 1
    words = pre + post + subject
    return (
        {COLOUR_WORDS[t] for t in words if t in COLOUR_WORDS},
        {SHAPE_WORDS[t] for t in words if t in SHAPE_WORDS},
        {SIZE_WORDS[t] for t in words if t in SIZE_WORDS},
    )


def _other_objects(toks, mentions: list[Mention], question: str | None, kind: str) -> None:
    """Mark mentions that describe an object other than the question's target."""
    t_colours, t_shapes, t_sizes = _target_descriptors(question)
    for m in mentions:
        colours, shapes, sizes = _bound_descriptors(toks, m)
        if kind == "shape":
            colours.discard(None)
            if t_colours and colours and not colours & t_colours:
                m.other_object = True
        elif kind == "colour":
            if (t_shapes and shapes and not shapes & t_shapes) or (t_sizes and sizes and not sizes & t_sizes):
                m.other_object = True


def _head_phrases(gold: str, lemma_names: Callable[[str], set[str]] | None) -> tuple[str, dict[str, str], str | None]:
    """The gold object's name (its last content word, or a known two-word name), the
    reply phrases that name it, and its colour (or None)."""
    words = [w for w in _words(gold) if w not in ARTICLES]
    content = [w for w in words if w not in STOPWORDS and not w.isdigit() and w not in NUMBER_WORDS]
    colour = next((COLOUR_WORDS[w] for w in content if w in COLOUR_WORDS), None)
    nouns = [w for w in content if w not in COLOUR_WORDS and w not in SIZE_WORDS]
    if not nouns and colour is not None and len(content) == 1:
        nouns, colour = content, None  # "An orange." to "What is right of the plums?": the fruit
    if not nouns:
        return "", {}, colour
    head = _singular(nouns[-1])
    two = " ".join([_singular(w) for w in nouns[-2:]]) if len(nouns) >= 2 else None
    name = two if two in OBJECT_SYNONYMS else head
    if name in SHAPE_WORDS.values():
        phrases = {w: SHAPE_WORDS[w] for w in SHAPE_WORDS}  # every shape: the others are other objects
        return name, phrases, colour
    phrases = {name: name, head: name}
    if two:
        phrases[two] = name
    for syn in OBJECT_SYNONYMS.get(name, ()):
        phrases[syn] = name
    if lemma_names is not None:
        for word in {head, two} - {None}:
            try:
                for syn in lemma_names(word):  # type: ignore[arg-type]
                    syn = syn.lower().replace("_", " ").replace("-", " ")
                    if syn and syn not in STOPWORDS:
                        phrases[syn] = name
            except Exception:  # an unknown word has no synonyms; the word itself still counts
                pass
    return name, phrases, colour


_TRANSCRIPT = re.compile(r"(?im)^\s*(?:user|human|question)\s*:.*?\b(?:assistant|gpt|answer|model)\s*:\s*", re.DOTALL)


#: a model's own special tokens left in its reply ("<s> B", "Yes</s>", "<|im_end|>")
_SPECIAL_TOKENS = re.compile(r"</?s>|<\|[a-z_]+\|>|<(?:pad|eos|bos|unk|end_of_turn|start_of_turn)>", re.IGNORECASE)


def _after_transcript(prediction: str) -> str:
    """A reply that echoes the chat ("User: <question> Assistant: Yes.") is what follows the
    last "Assistant:"; the echoed question is not part of the answer."""
    m = None
    for m in _TRANSCRIPT.finditer(prediction):  # noqa: B007 (the last match is kept)
        pass
    return prediction[m.end() :] if m is not None and prediction[m.end() :].strip() else prediction


def grade(
    prediction: Any,
    answer: str,
    question_type: str | None = None,
    question: str | None = None,
    lemma_names: Callable[[str], set[str]] | None = None,
) -> Grade:
    """Grade ``prediction`` against the gold ``answer`` (see the module docstring).

    >>> grade("2 circles and 1 square", "Two circles and one square.", "counting").verdict
    'correct'
    >>> grade("Not two, there are three.", "Two.", "counting").verdict
    'wrong'
    """
    if not isinstance(prediction, str) or not prediction.strip():
        return Grade(WRONG, "empty", answer_kind(answer, question_type, question))
    # the one cap on a model output (metrics/outputs.py); grading time grows faster than the length
    prediction = prediction[:MAX_OUTPUT_CHARS]
    prediction = _SPECIAL_TOKENS.sub(" ", _after_transcript(prediction)).strip()
    kind = answer_kind(answer, question_type, question)
    toks = tokens(prediction)
    if not [t for t in toks if t not in _SENTENCE_BREAK and t != "," and t != "layerref"]:
        if any(ch.isalpha() for ch in prediction):  # "はい": words the grader cannot read, not an empty reply
            return Grade(CANNOT_TELL, "no words the grader reads (not English)", kind)
        return Grade(WRONG, "empty", kind)
    text = " ".join(toks)
    qtoks = tokens(question) if question else []
    qset = set(qtoks)
    fn = {
        "yes/no": _grade_yes_no,
        "count": _grade_count,
        "relation": _grade_relation,
        "colour": _grade_attribute,
        "shape": _grade_attribute,
        "object": _grade_object,
    }[kind]
    if kind == "yes/no":
        return _grade_yes_no(toks, text, answer, question, qtoks, qset, kind, lemma_names, raw=prediction)
    return fn(toks, text, answer, question, qtoks, qset, kind, lemma_names)


def _finish(kind, toks, text, mentions, gold_value, equal, qset, qtoks) -> Grade:
    chosen = _choose(toks, mentions, qset, qtoks)
    denied_gold = any(m.negated and equal(m.value, gold_value) for m in mentions)
    if chosen is None:
        affirmed = [m for m in mentions if m.affirmed]
        if denied_gold and not any(equal(m.value, gold_value) for m in affirmed):
            return Grade(WRONG, f"denies the gold {kind}", kind)
        if affirmed:
            return Grade(
                CANNOT_TELL, f"several {kind}s without one chosen", kind, sorted({str(m.value) for m in affirmed})
            )
        others = [m for m in mentions if m.other_object and not (m.negated or m.option)]
        if others and not _REFUSAL.search(text):
            return Grade(WRONG, f"answers about another object ({kind} {others[0].value})", kind, others[0].value)
        return Grade(CANNOT_TELL, _no_answer_reason(mentions, text, kind), kind)
    value, how = chosen
    if equal(value, gold_value):
        if denied_gold:
            return Grade(CANNOT_TELL, f"both states and denies the gold {kind}", kind, value)
        return Grade(CORRECT, f"{kind}: {how}", kind, value)
    return Grade(WRONG, f"{kind}: {how} is not the gold one", kind, value)


def _grade_attribute(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    """A colour or a shape: one word of a closed vocabulary."""
    vocabulary, find = (COLOUR_WORDS, _colours) if kind == "colour" else (SHAPE_WORDS, _shapes)
    gold = next(vocabulary[w] for w in _words(answer) if w in vocabulary)
    mentions = find(toks)
    _mark_context(toks, mentions)
    _other_objects(toks, mentions, question, kind)
    _in_question(mentions, {vocabulary[t] for t in qset if t in vocabulary}, toks, qtoks)
    return _finish(kind, toks, text, mentions, gold, lambda a, b: a == b, qset, qtoks)


#: a stated final answer: "So the answer is no", "Answer: (B) No", "Therefore, yes."; the last one decides
_FINAL_YES_NO = re.compile(
    r"(?:\b(?:final\s+)?answer\s+(?:is|would\s+be|will\s+be)\s*:?|\banswer\s*:|\b(?:so|therefore|thus|hence|in\s+conclusion|in\s+short|overall)\s*,?)"
    r"\s*(?:[a-e]\s*[,.:]?\s+)?(?:it\s+is\s+|that\s+is\s+)?(yes|no)\b(?=\s*(?:[.,;:!?\n]|$))"
)
_YES_NO_REFUSAL = re.compile(
    r"\b(?:i'm|i\s+am)\s+sorry\b|\b(?:can't|cannot|can\s+not|unable\s+to|not\s+able\s+to)\s+(?:help|assist|answer|provide|compare|determine|"
    r"tell|say|confirm|verify|identify|know|see)\b|\b(?:i|we)\s+(?:don't|do\s+not)\s+have\b|\b(?:there\s+is|i\s+have)\s+(?:no|not\s+enough)\s+"
    r"(?:information|data|details)\b|\bnot\s+(?:possible|enough\s+information)\s+to\b|\bno\s+(?:way|information|data)\s+to\b|\bimpossible\s+to\b|"
    r"\bnot\s+(?:sure|certain)\b|\bi\s+don't\s+know\b"
)
#: a comparison or state the question asks about -> words that answer it the other way
_ANTONYMS: dict[str, set[str]] = {
    "same": {"different", "differ", "differs", "distinct"},
    "different": {"same", "identical", "equal", "alike", "similar"},
    "identical": {"different", "differ", "distinct"},
    "equal": {"different", "unequal"},
    "larger": {"smaller", "same", "equal"},
    "bigger": {"smaller", "same", "equal"},
    "smaller": {"larger", "bigger", "same", "equal"},
    "taller": {"shorter", "same", "equal"},
    "shorter": {"taller", "longer", "same", "equal"},
    "longer": {"shorter", "same", "equal"},
    "higher": {"lower", "same"},
    "lower": {"higher", "same"},
    "more": {"fewer", "less", "same"},
    "fewer": {"more", "same"},
    "less": {"more", "same"},
    "heavier": {"lighter", "same"},
    "lighter": {"heavier", "same"},
    "wider": {"narrower", "same"},
    "present": {"absent", "missing"},
    "open": {"closed", "shut"},
    "closed": {"open"},
    "empty": {"full", "occupied"},
    "full": {"empty"},
    "dirty": {"clean", "spotless"},
    "clean": {"dirty"},
    "wet": {"dry"},
    "dry": {"wet"},
    "on": {"off"},
    "off": {"on"},
    "left": {"right"},
    "right": {"left"},
    "above": {"below", "under", "beneath"},
    "below": {"above", "over"},
    "inside": {"outside"},
    "outside": {"inside"},
}
_ABSENT = {"absent", "missing", "empty"}
#: comparatives read the other way only in a comparison ("than", "same", "different" in the question)
_COMPARATIVES = {
    "larger",
    "bigger",
    "smaller",
    "taller",
    "shorter",
    "longer",
    "higher",
    "lower",
    "more",
    "fewer",
    "less",
    "heavier",
    "lighter",
    "wider",
}
_YES_NO_STOP = STOPWORDS | {
    "does",
    "do",
    "did",
    "you",
    "your",
    "please",
    "yes",
    "no",
    "according",
    "image",
    "images",
    "photo",
    "picture",
    "shown",
    "show",
    "shows",
    "any",
    "some",
    "all",
    "there",
    "exist",
    "exists",
    "visible",
    "answer",
    "word",
    "single",
    "correct",
    "true",
    "actually",
    "indeed",
}
_STATEMENT_NEGATORS = _NEGATORS - {"without", "hardly"} | {"none", "nobody", "nowhere"}


def _content(words) -> set[str]:
    return {
        _singular(w)
        for w in words
        if w not in _YES_NO_STOP and w not in _SENTENCE_BREAK and w != "," and not w.isdigit()
    }


def _statement_polarity(toks: Sequence[str], qtoks: Sequence[str]) -> tuple[bool | None, str]:
    """Read a yes/no question's answer from the statement that restates it: the clause that
    shares the most of the question's content words, its own negation (not one in another
    clause), and comparisons or states said the other way ("the same size" to "Is A
    larger?"). None when no clause restates the question."""
    q_content = _content(qtoks)
    q_words = {w for w in qtoks if w in _ANTONYMS and (w not in _COMPARATIVES or "than" in qtoks)}
    if not q_content:
        return None, "no question to restate"
    # clauses: split at sentence ends, commas, semicolons and contrast / relative words
    splitters = _SENTENCE_BREAK | {
        ",",
        "but",
        "however",
        "whereas",
        "while",
        "although",
        "though",
        "which",
        "because",
        "since",
        "so",
    }
    clauses: list[list[str]] = [[]]
    for t in toks:
        if t in splitters:
            if clauses[-1]:
                clauses.append([])
            continue
        clauses[-1].append(t)
    clauses = [c for c in clauses if c]
    best, best_score = None, 0.0
    for c in clauses:
        overlap = _content(c) & q_content
        compared = {w for w in c if any(w in _ANTONYMS.get(q, ()) for q in q_words)}
        score = len(overlap) + (1.5 if compared else 0)
        if score > best_score:
            best, best_score = c, score
    if best is None:
        return None, "no clause restates the question"
    overlap = _content(best) & q_content
    compared = [w for w in best if any(w in _ANTONYMS.get(q, ()) for q in q_words)]
    # a negator negates what follows it: it counts when a word of the question (or the
    # comparison) comes within five words ("not in direct contact with the stairs"), not
    # when it negates something else ("the sand is fine and not large")
    bound = q_content | set(compared)
    negated = (
        sum(
            1
            for i, t in enumerate(best)
            if (t in _STATEMENT_NEGATORS or t.endswith("n't"))
            and any(_singular(w) in bound or w in bound for w in best[i + 1 : i + 6])
        )
        % 2
        == 1
    )
    if re.search(r"\b(?:maybe|possibly|perhaps|might|may)\b", " ".join(best)):
        return None, "hedges in the statement that restates the question"
    if compared:
        said = negated
        if (
            "than" in qtoks and "than" in best
        ):  # "the right tower is shorter than the left one": subject and object swapped
            qi, ci = list(qtoks).index("than"), best.index("than")
            q_subject, q_object = _content(qtoks[:qi]) - _COMPARATIVES, _content(qtoks[qi + 1 :]) - _COMPARATIVES
            c_object = _content(best[ci + 1 :]) - _COMPARATIVES
            if c_object & (q_subject - q_object) and not c_object & (q_object - q_subject):
                said = not said
        return said, "the statement says it the other way"  # "the same size" to "larger?": no (unless negated)
    if any(t in _ABSENT for t in best) and not negated:
        return False, "the statement says it is absent"
    if len(overlap) * 2 < len(q_content) and len(overlap) < 3:
        return None, "no clause restates the question"
    return (not negated), "the statement that restates the question"


_OPTION_IN_QUESTION = re.compile(r"\(([A-Ea-e])\)\s*([^()\n]*?)\s*(?=\([A-Ea-e]\)|\n|$)")
_OPTION_ALONE = re.compile(r"^\W*\(?([A-Ea-e])\)?\W*$")
_OPTION_FIRST = re.compile(r"^[\s*_#>\"]*(?:\(([A-Ea-e])\)|([A-Ea-e])[).:])\s*([A-Za-z]*)")


_OPTION_WITH_TEXT = re.compile(r"\(([A-Ea-e])\)\s*(yes|no)\b", re.IGNORECASE)
_OPTION_PICKED = re.compile(
    r"\b(?:select|choose|pick|answer\s+is|answer:|choice\s+is|option\s+is)\s*:?\s*(?:choice|option)?\s*\(([A-Ea-e])\)",
    re.IGNORECASE,
)


def _chosen_option(raw: str, question: str | None) -> str | None:
    """The yes/no a reply picks by an option letter: "(B) no ...", a bare "B", "(B)", "I
    would select choice (B)", "... is (A) yes." (every lettered yes/no it says agreeing),
    read by the options the question lists ("(A) yes (B) no"); None when it picks none."""
    options = {k.lower(): v.strip().lower() for k, v in _OPTION_IN_QUESTION.findall(question or "")}
    m = _OPTION_ALONE.match(raw)
    letter, text = (m.group(1).lower(), "") if m else (None, "")
    if letter is None:
        m = _OPTION_FIRST.match(raw)
        if m:
            letter, text = (m.group(1) or m.group(2)).lower(), m.group(3).lower()
    if letter is None:
        said = {t.lower() for _l, t in _OPTION_WITH_TEXT.findall(raw)}
        if len(said) == 1:
            return said.pop()
        picked = {p.lower() for p in _OPTION_PICKED.findall(raw)}
        if len(picked) == 1:
            letter = picked.pop()
    if letter is None:
        return None
    if text in ("yes", "no"):
        return text
    value = options.get(letter, "")
    word = value.split()[0] if value.split() else ""
    return word if word in ("yes", "no") else None


def _grade_yes_no(toks, text, answer, question, qtoks, qset, kind, lemma_names, raw: str = "") -> Grade:
    gold = _words(answer)[0] == "yes"
    words = [t for t in toks if t not in (",",)]
    yes = {"yes", "yeah", "yep", "correct", "indeed", "true"}
    no = {"no", "nope", "false"}
    first = next((t for t in words if t not in _SENTENCE_BREAK), "")
    finals = _FINAL_YES_NO.findall(text)
    option = _chosen_option(raw, question) if raw else None
    if finals:  # an explicit final answer decides ("I can't tell ... So the answer is (B), No.")
        said, how = finals[-1] == "yes", "the stated final answer"
    elif option is not None:  # "(B) no ...", or "B" for "(A) yes (B) no"
        said, how = option == "yes", "the option letter it picks"
    elif first in yes and first not in no:
        said, how = True, "opens with yes"
    elif first in no:
        said, how = False, "opens with no"
    elif _YES_NO_REFUSAL.search(text) or _REFUSAL.search(text):
        return Grade(CANNOT_TELL, "says it cannot tell", kind)
    else:
        if re.search(r"\byes and no\b", text) or (not qtoks and re.search(r"\bmaybe\b|\bpossibly\b|\bperhaps\b", text)):
            return Grade(CANNOT_TELL, "hedges between yes and no", kind)
        if not qtoks:  # no question to read a statement against: the old reading, negation or not
            said = not any(t in _NEGATORS or t.endswith("n't") for t in words)
            how = "yes/no"
        else:
            polarity, how = _statement_polarity(toks, qtoks)
            if polarity is None:
                return Grade(CANNOT_TELL, f"no yes or no: {how}", kind)
            said = polarity
    return Grade(CORRECT if said == gold else WRONG, f"yes/no: {how}", kind, "yes" if said else "no")


def _grade_relation(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    gtoks = _words(answer)
    grels = _relations(gtoks)
    gold = grels[0].value
    ref = {t for t in gtoks[grels[0].end :] if t not in STOPWORDS}
    mentions = _relations(toks)
    _mark_context(toks, mentions)
    clause = _clauses(toks)
    for m in mentions:
        # "the blue triangle is to the right of the red circle": the reference object said
        # first, so the relation is the other way round
        before = {t for t, c in zip(toks[: m.start], clause[: m.start]) if c == m.clause and t not in STOPWORDS}
        after = {t for t, c in zip(toks[m.end :], clause[m.end :]) if c == m.clause and t not in STOPWORDS}
        if ref and ref <= before and not ref <= after and m.value in OPPOSITE:
            m.value = OPPOSITE[m.value]
    # a relation the reply contradicts itself on: "left, not right" is fine; both affirmed is not
    affirmed = {m.value for m in mentions if m.affirmed}
    if gold in affirmed and OPPOSITE.get(gold) in affirmed:
        return Grade(CANNOT_TELL, "states both the relation and its opposite", kind, sorted(affirmed))
    if gold in affirmed and not any(m.negated and m.value == gold for m in mentions):
        return Grade(CORRECT, "relation: the gold one, no opposite", kind, gold)
    return _finish(kind, toks, text, mentions, gold, lambda a, b: a == b, set(), [])


def _grade_object(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    name, phrases, colour = _head_phrases(answer, lemma_names)
    if not name:
        ok = " ".join(_words(answer)) in text
        return Grade(CORRECT if ok else WRONG, "exact", kind)
    mentions = _object_mentions(toks, phrases)
    _mark_context(toks, mentions)
    shapes = name in SHAPE_WORDS.values()
    q_values = set()
    if question:
        q_values = {m.value for m in _object_mentions(tokens(question), phrases)}
    _in_question(mentions, q_values, toks, qtoks)

    def equal(value, gold):
        c, obj = value
        return obj == gold[1] and (gold[0] is None or c == gold[0])

    gold = (colour, name)
    stated = _stated_answer_span(toks)
    if stated is not None and not shapes:
        s0, s1 = stated
        in_span = [m for m in mentions if s0 <= m.start < s1 and not m.negated]
        rest = [t for t in toks[s0:s1] if t not in STOPWORDS and t not in _SENTENCE_BREAK and t != "," and len(t) > 1]
        hedged = any(t in _NEGATORS or t.endswith("n't") for t in toks[s0:s1]) or _REFUSAL.search(" ".join(toks[s0:s1]))
        if (
            not in_span
            and rest
            and not hedged
            and not any(m.option or m.negated for m in mentions if s0 <= m.start < s1)
        ):
            return Grade(
                WRONG, f"the stated answer names another object than the gold {name}", kind, " ".join(rest[:4])
            )
    # the right object without the colour that tells it apart is not enough to tell
    if colour is not None:
        bare = [m for m in mentions if m.affirmed and m.value[1] == name and m.value[0] is None and not m.in_question]
        full = [m for m in mentions if m.affirmed and equal(m.value, gold)]
        if (
            bare
            and not full
            and not [m for m in mentions if m.affirmed and m.value[0] is not None and not m.in_question]
        ):
            return Grade(CANNOT_TELL, f"names a {name} without its colour", kind, name)
        for m in mentions:
            if m.value[0] is None and m.value[1] == name:
                m.option = True  # neither for nor against
    g = _finish(kind, toks, text, mentions, gold, equal, qset, qtoks)
    if (
        g.verdict == CANNOT_TELL
        and re.search(r"\b(nothing|none|no object|no objects|no thing)\b", text)
        and not _REFUSAL.search(text)
    ):
        return Grade(WRONG, "says there is no such object", kind)
    if g.verdict == CANNOT_TELL and not shapes and g.reason.startswith("no "):
        # free vocabulary: a reply that names something, refuses nothing and lists no
        # options answers with another object
        if not _REFUSAL.search(text) and not any(m.option for m in mentions):
            return Grade(WRONG, f"names another object than the gold {name}", kind)
    return g


def _stated_answer_span(toks: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) of the words after the last "the answer is" / "Answer:" up to the end of its sentence."""
    found = None
    for i in range(len(toks) - 1):
        if toks[i] == "answer" and (
            toks[i + 1] == ":" or (toks[i + 1] == "is" and (i == 0 or toks[i - 1] in ("the", "final", "my", "correct")))
        ):
            j = i + 2
            while j < len(toks) and toks[j] not in _SENTENCE_BREAK - {":"}:
                j += 1
            found = (i + 2, j)
    return found


def _grade_count(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    gold = [m for m in _numbers(_words(answer))]
    if not gold:
        return Grade(CANNOT_TELL, "the gold answer has no count", kind)
    mentions = _numbers(toks)
    _mark_context(toks, mentions)
    q_numbers = {m.value for m in _numbers(qtoks)} if qtoks else set()
    _in_question(mentions, q_numbers)
    generic = {"object", "thing", "shape", "item", "total", ""}
    if len(gold) == 1:
        target = gold[0].words[-1] if gold[0].words[-1] not in generic else None
        q_nouns = {_singular(SHAPE_WORDS.get(t, t)) for t in qtoks} if qtoks else set()
        affirmed = [m for m in mentions if m.affirmed]
        tied = [
            m
            for m in affirmed
            if m.words[-1] and (m.words[-1] == target or m.words[-1] in q_nouns) and m.words[-1] not in generic
        ]
        # an explicit total ("so there are two", "five in all") wins; then, as in "one in
        # layer 1, one in layer 2, three circles", the count tied to the counted noun
        marked = [m for m in affirmed if m.marked and (m in tied or not m.words[-1] or m.words[-1] in generic)]
        pool = marked if marked and len({m.value for m in marked}) == 1 else (tied or affirmed)
        plural = [m for m in pool if m.value != 1]
        if (
            tied
            and len({m.value for m in tied}) > 1
            and plural
            and len({m.value for m in plural}) == 1
            and any(m.value == 1 for m in tied)
        ):
            pool = plural
        for_choice = pool if pool else mentions
        chosen = _choose(toks, [m for m in for_choice], qset, qtoks) if for_choice else None
        if chosen is None and tied:
            chosen = _choose(toks, tied, set(), [])
        if chosen is None:
            return _finish(kind, toks, text, mentions, gold[0].value, lambda a, b: a == b, qset, qtoks)
        value, how = chosen
        denied = any(m.negated and m.value == gold[0].value for m in mentions)
        if value == gold[0].value and not denied:
            return Grade(CORRECT, f"count: {how}", kind, value)
        if value == gold[0].value:
            return Grade(CANNOT_TELL, "both states and denies the gold count", kind, value)
        return Grade(WRONG, f"count: {how} is not the gold one", kind, value)
    # several groups ("Two circles and one square"): each bound to its noun when the reply
    # names the nouns, else in the gold's order
    nouns = [m.words[-1] for m in gold]
    affirmed = [m for m in mentions if m.affirmed and not m.in_question]
    if not affirmed:
        return Grade(CANNOT_TELL, _no_answer_reason(mentions, text, "count"), kind)
    said: list[Any] = []
    if len(set(nouns)) == len(nouns) and all(n not in generic for n in nouns):
        for m in affirmed:  # "the circles number two", "circles: 2": the noun before the count
            if not m.words[-1] or m.words[-1] not in nouns:
                before = [_singular(t) for t in toks[max(0, m.start - 3) : m.start]]
                hit = [n for n in nouns if n in before]
                if hit:
                    m.words = (*m.words[:-1], hit[-1])
        for noun in nouns:
            values = {m.value for m in affirmed if m.words[-1] == noun}
            said.append(values.pop() if len(values) == 1 else (None if not values else "several"))
        if "several" in said:
            return Grade(CANNOT_TELL, "several counts for one group", kind, said)
        if None in said:
            loose = [m.value for m in affirmed if m.words[-1] in generic or m.words[-1] not in nouns]
            if said.count(None) == len(said) and len(loose) >= len(gold):
                said = loose[: len(gold)]
            elif None in said:
                return Grade(WRONG, "a group without its count", kind, said)
    else:
        groups = _group_clauses(answer)
        said = _counts_by_description(toks, affirmed, groups) or [m.value for m in affirmed][: len(gold)]
        if len(said) < len(gold):
            return Grade(WRONG, "a group without its count", kind, said)
    ok = all(s == g.value for s, g in zip(said, gold))
    return Grade(CORRECT if ok else WRONG, "counts per group", kind, said)


_FRONT = {"front", "frontward", "frontwards", "forward", "forwards", "toward", "towards", "camera", "facing"}
_BACK = {"back", "backward", "backwards", "away", "behind", "turned"}


def _group_clauses(answer: str) -> list[set[str]]:
    out = []
    for part in re.split(r",| and ", answer.lower()):
        toks = tokens(part)
        if any(w in NUMBER_WORDS or w.isdigit() for w in toks):
            out.append({t for t in toks if t not in STOPWORDS})
    return out


def _counts_by_description(toks, affirmed: list[Mention], groups: list[set[str]]) -> list[Any] | None:
    """Counts of groups that share a noun ("two dogs face frontward, one faces backward"),
    bound by the words describing each group (front / back folded)."""
    if not groups:
        return None

    def fold(words):
        return {("FRONT" if w in _FRONT - {"facing"} else "BACK" if w in _BACK else w) for w in words}

    # each count's own words: from it to the next count (or the end of its sentence)
    segments = []
    for k, m in enumerate(affirmed):
        end = affirmed[k + 1].start if k + 1 < len(affirmed) else len(toks)
        seg = []
        for t in toks[m.start : end]:
            if t in _SENTENCE_BREAK:
                break
            seg.append(t)
        segments.append(fold(seg))
    out = []
    for g in groups:
        gw = fold(g) & {"FRONT", "BACK"} or fold(g)
        scores = [len(seg & gw) for seg in segments]
        if not scores or max(scores) == 0 or scores.count(max(scores)) > 1:
            return None
        out.append(affirmed[scores.index(max(scores))].value)
    return out


__all__ = ["CANNOT_TELL", "CORRECT", "KINDS", "VERDICTS", "WRONG", "Grade", "answer_kind", "grade", "tokens"]


# -- graded files (``lmms-scene layered-vqa grade``) ---------------------------------------------

#: fields of one line of an answers file: required, then optional
ANSWER_FIELDS = ("id", "gold", "question_type", "answer")
OPTIONAL_FIELDS = ("question", "label")


def read_answers(path) -> list[dict[str, Any]]:
    """The lines of an answers file (JSON lines: ``id``, ``gold``, ``question_type``,
    ``answer``; optional ``question`` and ``label``, one of :data:`VERDICTS`), checked:
    an error names the file, the line, the field and the value."""
    out, seen = [], {}
    for line, rec in iter_jsonl(path):
        where = f"{path} line {line}"
        for name in ANSWER_FIELDS:
            if name not in rec:
                raise ValueError(f"{where}: missing field {name!r} (each line needs {', '.join(ANSWER_FIELDS)})")
        if not isinstance(rec["id"], (str, int)) or isinstance(rec["id"], bool) or str(rec["id"]) == "":
            raise ValueError(f"{where}: id: expected a non-empty string or integer, got {rec['id']!r}")
        if str(rec["id"]) in seen:
            raise ValueError(f"{where}: id: {rec['id']!r} repeats line {seen[str(rec['id'])]}")
        seen[str(rec["id"])] = line
        if not isinstance(rec["gold"], str) or not rec["gold"].strip():
            raise ValueError(f"{where}: gold: expected a non-empty string, got {rec['gold']!r}")
        if rec["question_type"] not in QUESTION_TYPES:
            raise ValueError(
                f"{where}: question_type: {rec['question_type']!r} is not one of {', '.join(QUESTION_TYPES)}"
            )
        if not isinstance(rec["answer"], str):
            raise ValueError(
                f'{where}: answer: expected a string ("" for an empty reply), got {type(rec["answer"]).__name__} {rec["answer"]!r}'
            )
        if rec.get("question") is not None and not isinstance(rec["question"], str):
            raise ValueError(f"{where}: question: expected a string, got {rec['question']!r}")
        if rec.get("label") is not None and rec["label"] not in VERDICTS:
            raise ValueError(f"{where}: label: {rec['label']!r} is not one of {', '.join(VERDICTS)}")
        out.append(rec)
    if not out:
        raise ValueError(f"{path}: no answers (one JSON object a line: {', '.join(ANSWER_FIELDS)})")
    return out


def grade_answers(
    records: Sequence[dict[str, Any]], lemma_names: Callable[[str], set[str]] | None = None
) -> dict[str, Any]:
    """Every record graded, and, where records carry a ``label``, the agreement with it
    (overall, and per label as a confusion count)."""
    rows = []
    for rec in records:
        g = grade(rec["answer"], rec["gold"], rec["question_type"], rec.get("question"), lemma_names)
        row = {"id": rec["id"], **g.to_dict()}
        if len(rec["answer"]) > MAX_OUTPUT_CHARS:
            row["answer_cut"] = f"graded on its first {MAX_OUTPUT_CHARS} of {len(rec['answer'])} characters"
        if rec.get("label") is not None:
            row["label"] = rec["label"]
            row["agrees"] = g.verdict == rec["label"]
        rows.append(row)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    summary: dict[str, Any] = {"n": len(rows), "verdicts": counts}
    labelled = [r for r in rows if "label" in r]
    if labelled:
        summary["labelled"] = len(labelled)
        summary["agreement"] = sum(r["agrees"] for r in labelled) / len(labelled)
        summary["confusion"] = {
            lab: {v: sum(1 for r in labelled if r["label"] == lab and r["verdict"] == v) for v in VERDICTS}
            for lab in VERDICTS
        }
    return {"grades": rows, "summary": summary}
