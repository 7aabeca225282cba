"""How the SNUS negation reader (``lmms_scene.metrics.cesg.checks.read``, the reading
``checks.labelled_agreement`` uses) agrees with labels that other people wrote, on text
that other people wrote. Nothing of their text is stored in this repository: each source
is read from a local ``fetch`` snapshot (a bare git directory) at its named commit, and
the repository and commit are printed beside each figure.

Sources (pass the snapshot directories on the command line):

``--negref DIR``  parkquasar/NegationCLIP, ``NegRefCOCOg/NegRefCOCOg.json``: crowd-written
    RefCOCOg referring expressions that the benchmark's authors selected because they
    contain a negation ("a vase with no flowers in it"). Label: negative, every one.
``--starsem DIR``  a repository holding the *SEM 2012 shared-task ConanDoyle-neg corpus
    (CD-SCO, ``data/starsem-st-2012-data/cd-sco/corpus/*/*.txt``, e.g.
    joey234/negation-focused-pretraining): Sherlock Holmes stories with negation cues,
    scopes and events annotated. Label: negative when the sentence has a whole-word cue
    (affixal cues such as "im-possible" are left out: SNUS reads only un-X participles and
    X-less artifacts); named object: the noun a "no"/"without"/"nobody" cue negates
    (the first noun of its annotated scope after the cue).
``--nlvr2neg DIR``  radidd/vision-and-language-negation (Dobreva and Keller 2021,
    "Investigating Negation in Pre-trained Vision-and-language Models"),
    ``negation-test-set/negation_test_set.jsonl``: NLVR2 statements that the benchmark's
    authors rewrote with a negation ("There is no empty glass.", "None of the dogs is
    wearing a jacket.", "It is not the case that ..."), each with its negation type
    (np-existential, np-nonexistential, np-num2none, v-existential, v-action, sw). Label:
    negative, every one (the file's unrewritten NLVR2 originals carry no negation label and
    are left out); figures also per negation type. A curated caption source.
``--haloquest DIR``  google/haloquest (Cha et al. 2024, "Visual Hallucination Benchmarks
    ... HaloQuest", ECCV), ``haloquest-train.csv`` and ``haloquest-eval.csv``: questions
    about real and generated images with the answers the benchmark's annotators wrote. The
    rows the source types "false premises" ask about something the image does not show
    ("What color is the kite?"); their answers, split at ";", say so ("There is no kite.",
    "He has no sword."). Label: negative, every answer of such a row; adjudicated: an answer
    with no absence cue at all (``HALOQUEST_CUE``: a fixed word list, not the reader) states
    no absence ("There is only 1 small fish swimming.", a ";"-split tail "it holds a ball.");
    so does a one-word answer ("None", "Zero", "0": elliptic, it names no object). Both rules
    were fixed on the development split before any reader change for this source.
    All answers of one row go to the same split. A curated caption source: the answers are
    written by the benchmark's own annotators, in the SNUS register. Named object: when an
    answer and its question share exactly one concrete noun (``_premise_object``: the
    ``concrete`` WordNet rule; words for the picture, places and properties left out), the
    reader's absent elements must contain it ("What color is the kite?" / "There is no
    kite." -> *kite*).
``--sfu DIR``  the SFU Review corpus annotated for negation (Konstantinova et al. 2012,
    ``data/SFU_Review_Corpus_Negation_Speculation``, same repository): product reviews.
    Label: negative when a negation cue is annotated (speculation cues ignored).

What SNUS calls an absence is narrower than what the two annotated corpora call a
negation (they also mark "I do not know", "he never said", attitudes): their agreement is
a lower bound that docs/snus.md reports beside the caption sources, not a target.

Printed per source: polarity agreement raw (the source's label) and adjudicated
(``ADJUDICATED``: sentences the source selected by keyword that state no negation, by id
hash), and the named-object agreement raw and on the concrete subset (``concrete``: a
WordNet rule that does not look at the reader).

Split: every sentence is assigned by a hash of (source, id) to ``dev`` (80 %) or
``final`` (20 %). Develop on ``dev`` (``--show N`` prints misses); measure ``final``
once, at the end.

Usage: python bench/bench_negation_corpus.py --negref DIR --nlvr2neg DIR --haloquest DIR --starsem DIR --sfu DIR
       [--split dev|final|all] [--show N] [--limit N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass
class Item:
    source: str
    id: str
    text: str
    negative: bool
    objects: list[str] = field(default_factory=list)
    #: why the source's label is overruled (``ADJUDICATED``), or None
    adjudicated: str | None = None
    #: the source's own category of the sentence (e.g. a negation type), or None
    kind: str | None = None
    #: what the split hashes instead of ``id`` (sentences that must stay together), or None
    group: str | None = None


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


def head(gitdir: str) -> tuple[str, str]:
    """(owner/name as the mirror folder names it, commit)."""
    p = Path(gitdir).resolve()
    name = next((q.name.replace("+", "/", 1) for q in [p, *p.parents] if "+" in q.name), p.name)
    return name, git(gitdir, "rev-parse", "HEAD").strip()


def split_of(source: str, ident: str) -> str:
    h = int(hashlib.sha1(f"{source}\0{ident}".encode()).hexdigest(), 16)
    return "final" if h % 5 == 0 else "dev"


# -- adjudication ------------------------------------------------------------------------

#: Sentences a source labels negative that state no negation at all (the source selected
#: them by keyword), keyed by the first 12 hex digits of sha1(sentence id), never by their
#: text. Their label under docs/snus.md's definition is "nothing absent". Figures are
#: printed raw (the source's label) and adjudicated (this list applied); the list was made
#: once, by reading every NegRefCOCOg expression that matches "no" + a number or a sign's
#: words, before any reader change, and covers both splits.
ADJUDICATED: dict[str, dict[str, str]] = {
    "NegRefCOCOg": {
        "54b8fc89916a": "number: a written label 'no.' + number",
        "7771f82e9b39": "number: a written label 'no.' + number",
        "51c1f1008be5": "number: a shirt number",
        "7cf8c579d3e1": "number: a shirt number",
        "2f267d9db2db": "number: a route number",
        "318286e3e6ac": "number: a train number",
        "a88bb2311cdd": "number: a tie number",
        "c6a9874b0502": "number: a shirt number",
        "f3e0d7e44dfe": "number: a shirt number",
        "e01095eb813f": "sign: a walk signal's words",
        "382ba58b71e7": "sign: a bus display's words",
        "b9eeb6404b57": "sign: a bus display's words",
        "e02721ef0c12": "sign: a bus display's words",
        "a9f591c10581": "note: the annotator says the image did not load; no referent",
    },
}


def adjudicate(it: Item) -> Item:
    key = hashlib.sha1(it.id.encode()).hexdigest()[:12]
    it.adjudicated = ADJUDICATED.get(it.source, {}).get(key, it.adjudicated)
    return it


# -- concrete objects ----------------------------------------------------------------------


def concrete(word: str) -> bool:
    """A rule independent of the reader: the word's first (most frequent) WordNet noun
    sense is a physical entity (physical_entity.n.01 among its hypernyms). "hat", "man",
    "window" are; "doubt", "idea", "interest", "way" are not."""
    from lmms_scene.nlp.wordnet import physical  # deferred: WordNet loads on first use

    return physical(word.lower())


# -- readers -----------------------------------------------------------------------------


def negref(gitdir: str, commit: str) -> Iterator[Item]:
    rows = json.loads(git(gitdir, "show", f"{commit}:NegRefCOCOg/NegRefCOCOg.json"))
    for n, row in enumerate(rows):
        phrase = re.sub(r"\s+'\s*(s|re|ve|ll|d|m|t)\b", r"'\1", row["phrase"])  # "it ' s" -> "it's"
        phrase = re.sub(r"\s+([,.;:!?'])", r"\1", phrase).replace(" - ", "-")
        yield Item("NegRefCOCOg", f"{n}:{row['image']}", phrase, True)


def nlvr2neg(gitdir: str, commit: str) -> Iterator[Item]:
    for line in git(gitdir, "show", f"{commit}:negation-test-set/negation_test_set.jsonl").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if "negation_type" not in row:
            continue  # an NLVR2 original: no negation label
        yield Item("NLVR2-negation", row["identifier"], row["sentence"], True, kind=row["negation_type"])


#: HaloQuest adjudication: an answer to a false-premise question with none of these words
#: states no absence (fixed before the source was measured; it does not look at the reader)
HALOQUEST_CUE = re.compile(
    r"\b(no|not|none|nothing|nobody|nowhere|never|neither|nor|without|lacks?|lacking|absent|absence|"
    r"missing|unable|cannot|devoid|zero|0)\b|n['\u2019]t\b|\bno[- ]one\b",
    re.IGNORECASE,
)


#: question words that name the picture, a place in it or a property, not a thing in it
#: (several are WordNet physical entities: "there", "side", "top")
_NOT_PREMISE = {
    *"image picture photo photograph scene painting drawing illustration frame view".split(),
    *"there here what how many much color colour kind type number side left right top bottom".split(),
    *"front back middle background foreground part area place".split(),
    *"down can wearing white black".split(),  # "sitting down" (WordNet's down: feathers), "can be seen"
}


def _premise_object(question: str, answer: str) -> str | None:
    """The one concrete noun that a HaloQuest question and its answer share (``concrete``:
    WordNet, not the reader; :data:`_NOT_PREMISE` left out), or None when they share none or
    several ("What color is the kite?" / "There is no kite." -> "kite"; "How many kites are
    in the sky?" / "There are no kites in the sky." -> None). Such an answer is the source's
    sentence naming the negated object."""

    def nouns(text: str) -> dict[str, str]:  # lemma -> the word as written
        words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)} - _NOT_PREMISE
        return {lemma(w): w for w in sorted(words) if len(w) > 2 and concrete(w)}

    in_answer = nouns(answer)
    shared = sorted(set(nouns(question)) & set(in_answer))
    return in_answer[shared[0]] if len(shared) == 1 else None  # as the answer writes it


def haloquest(gitdir: str, commit: str) -> Iterator[Item]:
    import csv
    import io

    for name in ("haloquest-train.csv", "haloquest-eval.csv"):
        for row in csv.DictReader(io.StringIO(git(gitdir, "show", f"{commit}:{name}"))):
            if row["hallucination type"] != "false premises":
                continue
            group = f"{name}:{row['']}"
            answers = [a.strip() for a in row["groundtruth responses"].split(";") if a.strip()]
            for k, answer in enumerate(answers):
                it = Item("HaloQuest", f"{group}#{k}", answer, True, kind=row["image type"], group=group)
                premise = _premise_object(row["question"], answer)
                if premise:
                    it.objects = [premise]
                if not HALOQUEST_CUE.search(answer):
                    it.adjudicated = "no absence cue in the answer (HALOQUEST_CUE)"
                elif len(re.findall(r"\w+", answer)) == 1:
                    it.adjudicated = "one word ('None', 'Zero', '0'): an elliptic answer names no object"
                yield it


_DETOK = [
    (re.compile(r"\s+([,.;:!?%)\]])"), r"\1"),
    (re.compile(r"([(\[$])\s+"), r"\1"),
    (re.compile(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b"), r"\1"),
    (re.compile(r"``\s*|\s*''"), '"'),
]


def detok(words: list[str]) -> str:
    s = " ".join(words)
    for pat, rep in _DETOK:
        s = pat.sub(rep, s)
    return s


def starsem(gitdir: str, commit: str) -> Iterator[Item]:
    files = [
        f
        for f in git(gitdir, "ls-tree", "-r", "--name-only", commit).splitlines()
        if "cd-sco/corpus/" in f and f.endswith(".txt") and "/test/" not in f
    ]
    for f in sorted(files):
        block: list[list[str]] = []
        for line in git(gitdir, "show", f"{commit}:{f}").splitlines() + [""]:
            if line.strip():
                block.append(line.split("\t"))
                continue
            if not block:
                continue
            rows, block = block, []
            words = [r[3] for r in rows]
            ncols = len(rows[0])
            n_neg = 0 if rows[0][7] == "***" else (ncols - 7) // 3
            whole_cue, objects = False, []
            for k in range(n_neg):
                cue = [(i, r[7 + 3 * k]) for i, r in enumerate(rows) if r[7 + 3 * k] != "_"]
                scope = {i for i, r in enumerate(rows) if r[8 + 3 * k] != "_"}
                if any(c.lower() == words[i].lower() for i, c in cue):
                    whole_cue = True
                for i, c in cue:
                    if c.lower() in ("no", "without", "nobody", "none") and c.lower() == words[i].lower():
                        after = [
                            j
                            for j in sorted(scope)
                            if j > i and rows[j][5].startswith("NN") and not rows[j][5].startswith("NNP")
                        ]
                        if after and after[0] <= i + 4:
                            objects.append(rows[after[0]][4].lower())
            if n_neg and not whole_cue:
                continue  # only affixal cues ("impossible"): not what SNUS reads
            yield Item("ConanDoyle-neg", f"{f}:{rows[0][0]}:{rows[0][1]}", detok(words), n_neg > 0, objects)


def sfu(gitdir: str, commit: str) -> Iterator[Item]:
    files = [
        f
        for f in git(gitdir, "ls-tree", "-r", "--name-only", commit).splitlines()
        if "SFU_Review_Corpus_Negation_Speculation/" in f and f.endswith(".xml")
    ]
    for f in sorted(files):
        try:
            root = ET.fromstring(git(gitdir, "show", f"{commit}:{f}"))
        except ET.ParseError:
            continue
        for n, sent in enumerate(root.iter("SENTENCE")):
            words = [w.text or "" for w in sent.iter("W")]
            words = [w for w in words if w]
            if not words:
                continue
            neg = any(c.get("type") == "negation" for c in sent.iter("cue"))
            yield Item("SFU-review-neg", f"{f}:{n}", detok(words), neg)


# -- measuring ---------------------------------------------------------------------------


def lemma(word: str) -> str:
    from lmms_scene.nlp.wordnet import morphy  # deferred: WordNet loads on first use

    w = word.lower()
    if w in ("one", "anyone", "someone", "nobody", "noone", "anybody", "somebody"):
        return "person"  # the reader names indefinite people "person"
    return morphy(w, "n") or w


def bases(word: str) -> set[str]:
    """Every WordNet base form of a noun ("cows" -> {"cows", "cow"}: ``morphy`` alone
    returns "cows", a WordNet lemma of its own), the word itself, and *person* for the
    indefinite people ``lemma`` maps."""
    from lmms_scene.nlp.wordnet import wordnet  # deferred: WordNet loads on first use

    w = word.lower()
    return {w, lemma(w), *wordnet()._morphy(w, "n")}


def has_object(elements: list[str], obj: str) -> bool:
    target = bases(obj)
    return any(target & set().union(*map(bases, re.findall(r"[a-z]+", e.lower()))) for e in elements if e)


def measure(items: list[Item], show: int) -> dict:
    from lmms_scene.metrics.cesg.checks import read

    agree = agree_adj = n_obj = obj_ok = n_conc = conc_ok = 0
    misses, obj_misses = [], []
    kinds: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    for it in items:
        got = read(it.text)
        if it.kind is not None:
            kinds.setdefault(it.kind, [0, 0])[1] += 1
            kinds[it.kind][0] += got["negative"] == it.negative
        if got["negative"] == it.negative:
            agree += 1
        expected = it.negative and it.adjudicated is None
        if got["negative"] == expected:
            agree_adj += 1
        else:
            misses.append((expected, it.text, got["elements"], it.adjudicated, it.kind))
        if it.negative and it.objects and it.adjudicated is None:
            n_obj += 1
            ok = all(has_object(got["elements"], o) for o in it.objects)
            obj_ok += ok
            if all(concrete(o) for o in it.objects):
                n_conc += 1
                conc_ok += ok
            if not ok:
                obj_misses.append((it.objects, it.text, got["elements"]))
    n = len(items)
    n_adj = sum(it.adjudicated is not None for it in items)
    out = {
        "n": n,
        "n_negative": sum(i.negative for i in items),
        "polarity_agreement": round(agree / n, 4) if items else None,
        "polarity_agree_n": agree,
        "n_adjudicated": n_adj,
        "polarity_agreement_adjudicated": round(agree_adj / n, 4) if items and n_adj else None,
        "polarity_agree_n_adjudicated": agree_adj if n_adj else None,
        "n_named_object": n_obj,
        "named_object_agreement": round(obj_ok / n_obj, 4) if n_obj else None,
        "named_object_ok": obj_ok,
        "n_named_object_concrete": n_conc,
        "named_object_agreement_concrete": round(conc_ok / n_conc, 4) if n_conc else None,
        "named_object_ok_concrete": conc_ok,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if kinds:
        out["polarity_per_kind"] = {k: f"{a}/{m}" for k, (a, m) in sorted(kinds.items())}
    if show:
        out["polarity_misses"] = [
            {
                "label": lab,
                "text": t[:300],
                "read": e,
                **({"adjudicated": a} if a else {}),
                **({"kind": k} if k else {}),
            }
            for lab, t, e, a, k in misses[:show]
        ]
        out["object_misses"] = [
            {"objects": o, "concrete": all(concrete(w) for w in o), "text": t[:300], "read": e}
            for o, t, e in obj_misses[:show]
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--negref", help="snapshot of parkquasar/NegationCLIP")
    ap.add_argument("--starsem", help="snapshot holding data/starsem-st-2012-data (CD-SCO)")
    ap.add_argument("--nlvr2neg", help="snapshot of radidd/vision-and-language-negation")
    ap.add_argument("--haloquest", help="snapshot of google/haloquest")
    ap.add_argument("--sfu", help="snapshot holding data/SFU_Review_Corpus_Negation_Speculation")
    ap.add_argument("--split", choices=("dev", "final", "all"), default="dev")
    ap.add_argument("--limit", type=int, default=0, help="at most N sentences per source (0: all)")
    ap.add_argument("--show", type=int, default=0, help="print up to N misses per source")
    args = ap.parse_args(argv)
    readers = [(args.negref, negref), (args.nlvr2neg, nlvr2neg), (args.starsem, starsem), (args.sfu, sfu)]
    readers.insert(2, (args.haloquest, haloquest))
    if not any(d for d, _ in readers):
        ap.error("name at least one snapshot (--negref, --nlvr2neg, --haloquest, --starsem, --sfu)")
    from lmms_scene.metrics.cesg.checks import read

    read("Warm up: there is no helmet.")
    code = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "lmms_scene"], capture_output=True, text=True
    ).stdout.strip()
    print(
        json.dumps(
            {
                "reader": "lmms_scene.metrics.cesg.checks.read",
                "lmms_scene_commit": code + ("+changes" if dirty else ""),
                "split": args.split,
            }
        )
    )
    total = 0
    for gitdir, reader in readers:
        if not gitdir:
            continue
        repo, commit = head(gitdir)
        items = [
            adjudicate(it)
            for it in reader(gitdir, commit)
            if args.split == "all" or split_of(it.source, it.group or it.id) == args.split
        ]
        if args.limit:
            items = sorted(items, key=lambda it: hashlib.sha1(it.id.encode()).hexdigest())[: args.limit]
        total += len(items)
        res = measure(items, args.show)
        print(
            json.dumps(
                {"source": items[0].source if items else reader.__name__, "repo": repo, "commit": commit, **res},
                ensure_ascii=False,
            )
        )
    print(json.dumps({"sentences": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
