"""Multi-word object names kept whole before spaCy tags and parses a sentence.

``en_core_web_sm`` often loses the head of a noun compound it does not know ("There is
no fire extinguisher." tags *extinguisher* as an adverb, so the absent object becomes
*fire*). A pipeline component placed first merges every known compound ("fire
extinguisher", "hard hat", "safety harness", "first aid kit") into one token before the
tagger and parser run, with the head word's NORM, so the model sees a noun it knows in
that slot: the merged token's lexeme gets the head word's NORM, shape, prefix and suffix
(the features ``en_core_web_sm`` embeds), so "first aid kit" is tagged and parsed as
"kit" would be.

The compounds are WordNet's 2-3 word nouns for things that can be in a scene (artifacts,
people, body parts, substances, places, objects, acts such as "fall protection") plus
lmms-scene's own list of safety equipment WordNet lacks (:data:`SAFETY_COMPOUNDS`).

>>> nlp = spacy_pipeline(merge_compounds=True)  # doctest: +SKIP
>>> [t.text for t in nlp("There is no fire extinguisher.")]  # doctest: +SKIP
['There', 'is', 'no', 'fire extinguisher', '.']
"""

from __future__ import annotations

from typing import Any

from lmms_scene import cache
from lmms_scene.nlp.wordnet import locked, synsets, wordnet

#: safety equipment and scene objects WordNet does not list as compounds (ours)
SAFETY_COMPOUNDS = (
    "guard rail",
    "guard rails",
    "first aid kit",
    "first-aid kit",
    "safety goggles",
    "safety glasses",
    "face shield",
    "face mask",
    "safety vest",
    "high-visibility vest",
    "hi-vis vest",
    "reflective vest",
    "warning sign",
    "warning signs",
    "warning light",
    "warning tape",
    "caution tape",
    "barrier tape",
    "traffic cone",
    "traffic cones",
    "ear protection",
    "eye protection",
    "hearing protection",
    "fall protection",
    "head protection",
    "respiratory protection",
    "safety helmet",
    "safety shoes",
    "safety boots",
    "steel-toe boots",
    "steel toe boots",
    "work boots",
    "work gloves",
    "safety gloves",
    "insulated gloves",
    "welding mask",
    "welding helmet",
    "welding screen",
    "welding gloves",
    "ear plugs",
    "ear muffs",
    "knee pads",
    "fire blanket",
    "smoke detector",
    "smoke alarm",
    "exit sign",
    "emergency exit",
    "emergency stop",
    "stop button",
    "machine guard",
    "blade guard",
    "saw guard",
    "safety guard",
    "safety barrier",
    "safety line",
    "safety rope",
    "safety railing",
    "toe board",
    "toe boards",
    "hand rail",
    "anchor point",
    "oven mitt",
    "oven mitts",
    "backup alarm",
    "reversing alarm",
    "seat belt",
    "seat belts",
    "dust mask",
    "gas mask",
    "life vest",
    "life jacket",
    "life ring",
    "lifeline",
    "fire hose",
    "fire alarm",
    "sprinkler system",
    "floor opening",
    "scaffold platform",
    "trench box",
    "ground fault",
    "lockout tag",
)
#: the kinds of WordNet noun compound merged (lexicographer files)
LEXNAMES = {"noun.artifact", "noun.person", "noun.body", "noun.substance", "noun.location", "noun.object", "noun.act"}
#: a compound starting with one of these is a phrase, not a name ("no one", "any more")
_STOP_FIRST = {
    "no",
    "any",
    "one",
    "the",
    "a",
    "an",
    "some",
    "all",
    "every",
    "each",
    "this",
    "that",
    "not",
    "none",
    "in",
    "on",
    "at",
    "to",
    "of",
}

#: a compound ending in one of these is a verb and its particle or preposition, not a name
#: ("looking at", "handing over", "mop up": WordNet lists them as nouns of acts, and merged
#: they turned "a woman looking at the dog" into one noun)
_STOP_LAST = frozenset(
    "at on in up down out off over about with to for by from into through away back around along after under "
    "upon onto against".split()
)


def compound_names() -> tuple[str, ...]:
    """Every compound the merger knows, lower case (WordNet's, then ours)."""

    def build() -> tuple[str, ...]:
        wn = wordnet()
        names = set(SAFETY_COMPOUNDS)
        with locked():
            lemmas = list(wn.all_lemma_names("n"))
            kinds = _noun_kinds(wn)
        for lemma in lemmas:
            parts = lemma.split("_")
            if (
                not 2 <= len(parts) <= 3
                or not all(p.isalpha() for p in parts)
                or parts[0].lower() in _STOP_FIRST
                or parts[-1].lower() in _STOP_LAST
            ):
                continue
            if kinds(lemma) & LEXNAMES:
                names.add(lemma.replace("_", " ").lower())
        return tuple(sorted(names | {plural(n) for n in names}))

    return cache.cached(("nlp", "compound_names"), build)


def _noun_kinds(wn: Any):
    """``kinds(lemma)``: the lexicographer files of the noun synsets ``synsets(lemma, "n")``
    gives. Read from WordNet's ``data.noun`` in one pass (each line's second field is the
    file's number) and NLTK's lemma index, with NLTK's own ``_morphy``, so each lemma costs
    a few lookups instead of parsing each of its synsets' data lines: the ~55,000 lookups
    of a load took 8.8 s, they now take under 2 s (test_nlp.py checks the two agree). A
    reader without those parts gets ``synsets(lemma, "n")`` itself."""
    index, morphy, lexnames = (getattr(wn, name, None) for name in ("_lemma_pos_offset_map", "_morphy", "_lexnames"))
    if not (isinstance(index, dict) and callable(morphy) and lexnames):
        return lambda lemma: {s.lexname() for s in synsets(lemma, "n")}
    kind: dict[int, str] = {}
    with wn.abspath("data.noun").open() as data:  # bytes, from a folder or a zip file alike
        for line in data:
            if not line.startswith(b" "):  # the licence header's lines start with spaces
                offset, number = line.split(b" ", 2)[:2]
                kind[int(offset)] = lexnames[int(number)]

    def kinds(lemma: str) -> set[str]:
        return {kind[offset] for form in morphy(lemma.lower(), "n") for offset in index.get(form, {}).get("n", ())}

    return kinds


def plural(name: str) -> str:
    """The regular plural of a compound's last word ("first aid kit" -> "first aid kits")."""
    head, _, last = name.rpartition(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}".strip()


def pattern_words(nlp: Any, names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Each name as the lower-case words ``nlp``'s tokenizer splits it into. A name of
    letters-only words none of which is a tokenizer special case ("cannot", "gonna") is
    split by the tokenizer at its spaces and nowhere else (no prefix, suffix or infix rule
    of spaCy's English tokenizer fires inside a run of letters): that is ``str.split``,
    without building the ~45,000 lexemes ``tokenizer.pipe`` makes, ~3 s of a SNUS run's
    start on 2 cores. The others ("first-aid kit") go through the tokenizer.
    test_nlp.py checks both give the tokenizer's words for every name."""
    rules = getattr(nlp.tokenizer, "rules", None) or {}
    out: list[tuple[str, ...] | None] = []
    other: list[tuple[int, str]] = []
    for i, name in enumerate(names):
        words = name.split(" ")
        if all(w.isalpha() and w not in rules for w in words):
            out.append(tuple(w.lower() for w in words))
        else:
            out.append(None)
            other.append((i, name))
    for (i, _), doc in zip(other, nlp.tokenizer.pipe(name for _, name in other)):
        out[i] = tuple(t.lower_ for t in doc)
    return [w for w in out if w]


class CompoundMerger:
    """The spaCy component: merges known compounds into one token (head's NORM).

    It matches as spaCy's ``PhraseMatcher(vocab, attr="LOWER")`` on the names' token
    sequences does (every run of tokens whose lower-case texts are a name's, overlaps
    included, then :func:`spacy.util.filter_spans`: longest first, then earliest), with a
    set of word tuples instead of the matcher's patterns, whose ~45,000 pattern docs took
    ~4 s to build per pipeline (test_nlp.py checks the two merge every test sentence alike)."""

    def __init__(self, nlp: Any):
        self.names = frozenset(pattern_words(nlp, compound_names()))
        self.lengths = sorted({len(words) for words in self.names})

    def spans(self, doc: Any) -> list[Any]:
        """Every token run of ``doc`` that is a known compound (overlapping runs included)."""
        lower = [t.lower_ for t in doc]
        found = []
        for start in range(len(lower)):
            for length in self.lengths:
                end = start + length
                if end <= len(lower) and tuple(lower[start:end]) in self.names:
                    found.append(doc[start:end])
        return found

    def __call__(self, doc: Any) -> Any:
        from spacy.util import filter_spans  # deferred: spaCy is heavy to import

        spans = filter_spans(self.spans(doc))
        if spans:
            vocab = doc.vocab
            for span in spans:
                # the tagger and parser embed NORM, PREFIX, SUFFIX and SHAPE: give the merged
                # lexeme the head's, so the model sees a noun it knows in this slot
                head, lex = span[-1], vocab[span.text]
                if lex.shape_ != head.shape_:
                    lex.shape_, lex.prefix_, lex.suffix_, lex.norm_ = (
                        head.shape_,
                        head.prefix_,
                        head.suffix_,
                        head.norm_,
                    )
            with doc.retokenize() as retokenizer:
                for span in spans:
                    retokenizer.merge(span, attrs={"NORM": span[-1].norm_})
        return doc


NAME = "lmms_scene_compounds"


def add_merger(nlp: Any) -> Any:
    """Put the compound merger first in ``nlp`` (idempotent); returns ``nlp``."""
    from spacy.language import Language  # deferred: spaCy is heavy to import

    if NAME not in nlp.pipe_names:
        if not Language.has_factory(NAME):
            Language.factory(NAME, func=lambda nlp, name: CompoundMerger(nlp))
        nlp.add_pipe(NAME, first=True)
    return nlp
