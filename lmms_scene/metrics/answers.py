"""The shared answer readers: what a model's reply says, for any task that asks a yes/no
question, a count, a colour, a shape, a relation or an option letter, and whether it
refuses. The Layered-VQA rule grader (:mod:`lmms_scene.metrics.layered_vqa.grader`)
grades with them; a new task reads its replies with them instead of writing a parser.

A reply is read as :func:`tokens` (lower-case words and punctuation; layer references
such as "layer 4" replaced by ``layerref``, so they are never read as answers). Each
reader finds the *mentions* of one kind of answer (:class:`Mention`: the value, where it
is) and :func:`mark_context` reads each mention in its context: negated ("not two"),
listed as an option ("a circle or a square"), in a question back, after an answer marker
("so", "the answer is"). :func:`read_yes_no` reads a yes/no reply as a whole (a stated
final answer, an option letter, an opening yes/no, a refusal, the statement that restates
the question); :func:`yes_no` does so from the reply's raw text. :data:`REFUSAL` and
:data:`YES_NO_REFUSAL` recognise a reply that says it cannot tell.

>>> [m.value for m in number_mentions(tokens("Two circles and 3 squares in layer 2."))]
[2, 3]
>>> yes_no("So the answer is (B), No.", "Is the cup red? (A) yes (B) no")
(False, 'the stated final answer')
>>> yes_no("I cannot tell from this image.")
(None, 'says it cannot tell')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_scene.metrics.answer_words import (
    ABSENT,
    ANTONYMS,
    ARTICLES,
    CLAUSE_BREAK,
    COLOUR_WORDS,
    COMPARATIVES,
    MARKERS,
    NEGATING_PHRASES,
    NEGATORS,
    NUMBER_WORDS,
    RELATION_PHRASES,
    SENTENCE_BREAK,
    SHAPE_WORDS,
    SIZE_WORDS,
    STATEMENT_NEGATORS,
    YES_NO_STOP,
)

REFUSAL = re.compile(
    r"\b(cannot|can't|can not|unable to|not able to|impossible to|hard to|difficult to|no way to) "
    r"(tell|say|determine|see|answer|identify|know|be sure|count|make out)|\bnot (sure|certain|clear|visible)\b|\bunclear\b|"
    r"\bi don't know\b|\bno idea\b|\bneed (more|the|another)\b|\bplease (provide|share|show|send)\b|"
    r"\bnot enough\b|\binsufficient\b|\bnot possible\b"
)


YES_NO_REFUSAL = re.compile(
    r"\b(?:i'm|i\s+am)\s+sorry\b|\b(?:can't|cannot|can\s+not|unable\s+to|not\s+able\s+to)\s+(?:help|assist|answer|provide|compare|determine|"
    r"tell|say|confirm|verify|identify|know|see)\b|\b(?:i|we)\s+(?:don't|do\s+not)\s+have\b|\b(?:there\s+is|i\s+have)\s+(?:no|not\s+enough)\s+"
    r"(?:information|data|details)\b|\bnot\s+(?:possible|enough\s+information)\s+to\b|\bno\s+(?:way|information|data)\s+to\b|\bimpossible\s+to\b|"
    r"\bnot\s+(?:sure|certain)\b|\bi\s+don't\s+know\b"
)


#: a stated final answer: "So the answer is no", "Answer: (B) No", "Therefore, yes."; the last one decides
FINAL_YES_NO = re.compile(
    r"(?:\b(?:final\s+)?answer\s+(?:is|would\s+be|will\s+be)\s*:?|\banswer\s*:|\b(?:so|therefore|thus|hence|in\s+conclusion|in\s+short|overall)\s*,?)"
    r"\s*(?:[a-e]\s*[,.:]?\s+)?(?:it\s+is\s+|that\s+is\s+)?(yes|no)\b(?=\s*(?:[.,;:!?\n]|$))"
)


_LAYER_REF = re.compile(
    r"\[?\b(?:layers?|images?|pictures?|frames?|turns?|shards?|rounds?)\s*(?:#|no\.?|number)?\s*"
    r"(?:\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)"
    r"(?:\s*(?:,|and|&|or|-|to|through)\s*(?:layers?\s*)?(?:\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)\b)*"
    r"(?:\s+of\s+the\s+scene\])?\]?|\bl\d+\b|\b\d+(?:st|nd|rd|th)\s+layer\b"
)


_SELECTION_LINE = re.compile(r"(?im)^\s*[*_]*layers?\s*(?:needed|used)?\s*[*_]*\s*[:=].*$")


_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[.,;:!?\n]")


_TRANSCRIPT = re.compile(r"(?im)^\s*(?:user|human|question)\s*:.*?\b(?:assistant|gpt|answer|model)\s*:\s*", re.DOTALL)


#: a model's own special tokens left in its reply ("<s> B", "Yes</s>", "<|im_end|>")
SPECIAL_TOKENS = re.compile(r"</?s>|<\|[a-z_]+\|>|<(?:pad|eos|bos|unk|end_of_turn|start_of_turn)>", re.IGNORECASE)


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


def word_tokens(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in SENTENCE_BREAK and t != ","]


def singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


def after_transcript(prediction: str) -> str:
    """A reply that echoes the chat ("User: <question> Assistant: Yes.") is what follows the
    last "Assistant:"; the echoed question is not part of the answer."""
    m = None
    for m in _TRANSCRIPT.finditer(prediction):  # noqa: B007 (the last match is kept)
        pass
    return prediction[m.end() :] if m is not None and prediction[m.end() :].strip() else prediction


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


def clauses(toks: Sequence[str]) -> list[int]:
    """The clause number of each token (a new clause after , ; . : but ...)."""
    out, k = [], 0
    for t in toks:
        out.append(k)
        if t in CLAUSE_BREAK:
            k += 1
    return out


def sentence_spans(toks: Sequence[str]) -> list[tuple[int, int, bool]]:
    """(start, end, is_question) of each sentence."""
    out, start = [], 0
    for i, t in enumerate(toks):
        if t in SENTENCE_BREAK:
            out.append((start, i + 1, t == "?"))
            start = i + 1
    if start < len(toks):
        out.append((start, len(toks), False))
    return out


def mark_context(toks: Sequence[str], mentions: list[Mention]) -> None:
    """Negation, options, question sentences and answer markers, for every mention."""
    clause = clauses(toks)
    sentences = sentence_spans(toks)
    for m in mentions:
        m.clause = clause[m.start]
        # negation: a negator in the same clause at most 4 tokens before ("is not a triangle",
        # "there aren't any squares", "not two"), or "rather than" / "instead of" right before
        lo = m.start
        while lo > 0 and clause[lo - 1] == m.clause and m.start - lo < 4:
            lo -= 1
        window = list(toks[lo : m.start])
        for j, t in enumerate(window):
            if t in NEGATORS or t.endswith("n't"):
                # "no" as an answer word ("No, it is red") is not a negator of what follows
                if t == "no" and (j + 1 < len(window) and window[j + 1] in (",", ".")):
                    continue
                m.negated = True
        for phrase in NEGATING_PHRASES:
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
                if any(t in MARKERS for t in head) or ("is" in head and "answer" in head):
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
            or (len(after) > 1 and after[1] == "or" and after[0] not in SENTENCE_BREAK)
        ):
            if not (after and after[0] == "or" and len(toks) > m.end + 1 and toks[m.end + 1] in ("not", "so")):
                m.option = True


def colour_mentions(toks: Sequence[str]) -> list[Mention]:
    return [Mention(COLOUR_WORDS[t], i, i + 1, words=(t,)) for i, t in enumerate(toks) if t in COLOUR_WORDS]


def shape_mentions(toks: Sequence[str]) -> list[Mention]:
    out = []
    for i, t in enumerate(toks):
        if t in SHAPE_WORDS:
            # "round" / "square" as adjectives of another shape word are one mention ("square box")
            out.append(Mention(SHAPE_WORDS[t], i, i + 1, words=(t,)))
    return out


def relation_mentions(toks: Sequence[str]) -> list[Mention]:
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
    return len([t for t in toks if t not in SENTENCE_BREAK and t != ","]) <= 2  # the whole reply: "Left."


def number_mentions(toks: Sequence[str]) -> list[Mention]:
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
        elif t == "no" and i + 1 < len(toks) and toks[i + 1] not in SENTENCE_BREAK | {","}:
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
            if tok in SENTENCE_BREAK or tok == ",":
                break
            if (
                tok in ARTICLES
                or tok in COLOUR_WORDS
                or tok in SIZE_WORDS
                or tok
                in ("of", "more", "distinct", "different", "separate", "visible", "total", "in", "all", "other", "such")
            ):
                continue
            noun = singular(SHAPE_WORDS.get(tok, tok)) if tok in SHAPE_WORDS else singular(tok)
            break
        m.words = (*m.words, noun or "")
    # "one layer", "five layers", "two images": about the delivery, not the scene
    return [
        m
        for m in out
        if m.words[-1]
        not in ("layer", "layerref", "image", "turn", "picture", "step", "part", "round", "shard", "frame")
    ]


def object_mentions(toks: Sequence[str], heads: dict[str, str]) -> list[Mention]:
    """Mentions of nouns in ``heads`` (a phrase of the reply -> the object it names),
    longest phrases first, with the colour just before them (``value = (colour, object)``)."""
    phrases = sorted(heads, key=lambda p: -len(p.split()))
    out: list[Mention] = []
    i = 0
    while i < len(toks):
        for p in phrases:
            words = p.split()
            if [singular(t) for t in toks[i : i + len(words)]] == [singular(w) for w in words]:
                colour = None
                for tok in reversed(toks[max(0, i - 3) : i]):
                    if tok in COLOUR_WORDS:
                        colour = COLOUR_WORDS[tok]
                        break
                    if tok in SENTENCE_BREAK or tok in (",", "of", "is", "are") or tok in NEGATORS:
                        break
                if colour is None:  # "the circle that is red", "the circle is red"
                    after = toks[i + len(words) : i + len(words) + 4]
                    for k, tok in enumerate(after):
                        if tok in SENTENCE_BREAK or tok == ",":
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


def stated_answer_span(toks: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) of the words after the last "the answer is" / "Answer:" up to the end of its sentence."""
    found = None
    for i in range(len(toks) - 1):
        if toks[i] == "answer" and (
            toks[i + 1] == ":" or (toks[i + 1] == "is" and (i == 0 or toks[i - 1] in ("the", "final", "my", "correct")))
        ):
            j = i + 2
            while j < len(toks) and toks[j] not in SENTENCE_BREAK - {":"}:
                j += 1
            found = (i + 2, j)
    return found


def _content(words) -> set[str]:
    return {
        singular(w) for w in words if w not in YES_NO_STOP and w not in SENTENCE_BREAK and w != "," and not w.isdigit()
    }


def statement_polarity(toks: Sequence[str], qtoks: Sequence[str]) -> tuple[bool | None, str]:
    """Read a yes/no question's answer from the statement that restates it: the clause that
    shares the most of the question's content words, its own negation (not one in another
    clause), and comparisons or states said the other way ("the same size" to "Is A
    larger?"). None when no clause restates the question."""
    q_content = _content(qtoks)
    q_words = {w for w in qtoks if w in ANTONYMS and (w not in COMPARATIVES or "than" in qtoks)}
    if not q_content:
        return None, "no question to restate"
    # clauses: split at sentence ends, commas, semicolons and contrast / relative words
    splitters = SENTENCE_BREAK | {
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
        compared = {w for w in c if any(w in ANTONYMS.get(q, ()) for q in q_words)}
        score = len(overlap) + (1.5 if compared else 0)
        if score > best_score:
            best, best_score = c, score
    if best is None:
        return None, "no clause restates the question"
    overlap = _content(best) & q_content
    compared = [w for w in best if any(w in ANTONYMS.get(q, ()) for q in q_words)]
    # a negator negates what follows it: it counts when a word of the question (or the
    # comparison) comes within five words ("not in direct contact with the stairs"), not
    # when it negates something else ("the sand is fine and not large")
    bound = q_content | set(compared)
    negated = (
        sum(
            1
            for i, t in enumerate(best)
            if (t in STATEMENT_NEGATORS or t.endswith("n't"))
            and any(singular(w) in bound or w in bound for w in best[i + 1 : i + 6])
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
            q_subject, q_object = _content(qtoks[:qi]) - COMPARATIVES, _content(qtoks[qi + 1 :]) - COMPARATIVES
            c_object = _content(best[ci + 1 :]) - COMPARATIVES
            if c_object & (q_subject - q_object) and not c_object & (q_object - q_subject):
                said = not said
        return said, "the statement says it the other way"  # "the same size" to "larger?": no (unless negated)
    if any(t in ABSENT for t in best) and not negated:
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


def chosen_option(raw: str, question: str | None) -> str | None:
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


def read_yes_no(
    toks: Sequence[str], text: str, raw: str, question: str | None, qtoks: Sequence[str]
) -> tuple[bool | None, str]:
    """The yes or no a reply says (``True`` / ``False``) and how it was read, or ``None`` with
    why it says neither (a refusal, a hedge, no statement that restates the question).
    ``toks`` / ``text`` are the reply's :func:`tokens` and their join, ``raw`` the reply as
    written (read for option letters), ``qtoks`` the question's tokens. In order: a stated
    final answer ("So the answer is (B), No."), an option letter picked by the options the
    question lists, an opening yes / no, a refusal, then the clause that restates the
    question (its own negation, comparisons and states said the other way)."""
    words = [t for t in toks if t not in (",",)]
    yes = {"yes", "yeah", "yep", "correct", "indeed", "true"}
    no = {"no", "nope", "false"}
    first = next((t for t in words if t not in SENTENCE_BREAK), "")
    finals = FINAL_YES_NO.findall(text)
    option = chosen_option(raw, question) if raw else None
    if finals:  # an explicit final answer decides ("I can't tell ... So the answer is (B), No.")
        said, how = finals[-1] == "yes", "the stated final answer"
    elif option is not None:  # "(B) no ...", or "B" for "(A) yes (B) no"
        said, how = option == "yes", "the option letter it picks"
    elif first in yes and first not in no:
        said, how = True, "opens with yes"
    elif first in no:
        said, how = False, "opens with no"
    elif YES_NO_REFUSAL.search(text) or REFUSAL.search(text):
        return None, "says it cannot tell"
    else:
        if re.search(r"\byes and no\b", text) or (not qtoks and re.search(r"\bmaybe\b|\bpossibly\b|\bperhaps\b", text)):
            return None, "hedges between yes and no"
        if not qtoks:  # no question to read a statement against: the old reading, negation or not
            said = not any(t in NEGATORS or t.endswith("n't") for t in words)
            how = "yes/no"
        else:
            polarity, how = statement_polarity(toks, qtoks)
            if polarity is None:
                return None, f"no yes or no: {how}"
            said = polarity
    return said, how


def yes_no(reply: str, question: str | None = None) -> tuple[bool | None, str]:
    """:func:`read_yes_no` on a reply as the model wrote it: a chat echo ("User: ...
    Assistant: Yes.") read after its last "Assistant:", special tokens ("<s>") dropped."""
    raw = SPECIAL_TOKENS.sub(" ", after_transcript(str(reply))).strip()
    toks = tokens(raw)
    return read_yes_no(toks, " ".join(toks), raw, question, tokens(question) if question else [])


def says_cannot_tell(reply: str) -> bool:
    """Whether a reply says it cannot tell ("I can't determine that", "not sure", "please
    provide another image"): :data:`REFUSAL` on its :func:`tokens`."""
    return REFUSAL.search(" ".join(tokens(str(reply)))) is not None
