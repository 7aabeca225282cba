"""The offline NLP pieces: WordNet from Debian's files, spaCy, Punkt, the encoder."""

from __future__ import annotations

import pytest

from lmms_scene.nlp import install
from lmms_scene.nlp.sentences import split_sentences
from lmms_scene.nlp.wordnet import lemma_names, lexname, synonyms


def test_lexnames_table_is_the_standard_45_lines():
    lines = install.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[18] == "18\tnoun.person\t1"
    assert lines[44] == "44\tadj.ppl\t3"


def test_install_wordnet_copies_files_and_nltk_reads_them(tmp_path):
    if not (install.DEBIAN_WORDNET / "index.sense").is_file():
        pytest.skip("Debian wordnet-base / wordnet-sense-index not installed")
    target = install.install_wordnet(tmp_path / "corpora" / "wordnet")
    written = {p.name for p in target.iterdir()}
    assert set(install.FILES) | {"lexnames"} == written
    assert not any(p.is_symlink() for p in target.iterdir())  # NLTK refuses links leaving its root
    assert install.install_wordnet(target) == target  # idempotent
    # NLTK reads the venv's copy (sys.prefix/nltk_data, written by `make setup`)
    from lmms_scene.nlp.wordnet import wordnet

    assert wordnet().synsets("helmet")[0].lexname() == "noun.artifact"


def test_install_wordnet_says_which_packages_are_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="wordnet-base wordnet-sense-index"):
        install.install_wordnet(tmp_path / "out", source=tmp_path / "nowhere")


def test_lemma_names_gives_wordnet_synonyms():
    assert {"hard hat", "safety hat", "tin hat"} <= lemma_names("safety hat")
    assert "guardrail" in lemma_names("safety rail", pos="n")
    assert lemma_names("zzqx-not-a-word") == {"zzqx-not-a-word"}
    assert synonyms("individual", "person") and not synonyms("helmet", "glove")
    assert lexname("worker") == "noun.person"


def test_lemma_names_validates_arguments():
    with pytest.raises(TypeError, match="word"):
        lemma_names(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pos"):
        lemma_names("hat", pos="x")


def test_split_sentences_keeps_abbreviations_together():
    text = "Mr. Smith is on the U.S. site. He has no helmet! Is there a rail? The wall. A man."
    assert split_sentences(text) == ["Mr. Smith is on the U.S. site.", "He has no helmet!", "Is there a rail?", "The wall.", "A man."]
    assert split_sentences("   ") == []


def test_spacy_pipeline_loads_the_registry_model():
    from lmms_scene.nlp.spacy_model import provenance, spacy_pipeline

    doc = spacy_pipeline()("The worker is not wearing a helmet.")
    assert [t.dep_ for t in doc if t.lower_ == "not"] == ["neg"]
    assert provenance()["spacy_model_version"].startswith("3.8")


def test_sentence_encoder_memoises_and_normalises():
    from lmms_scene.nlp.encoders import sentence_encoder

    enc = sentence_encoder()
    assert enc is sentence_encoder("minilm")
    vecs = enc.encode(["hard hat", "safety helmet", "hard hat"])
    assert vecs.shape == (3, 384)
    assert abs(float(vecs[0] @ vecs[0]) - 1) < 1e-5 and float(vecs[0] @ vecs[2]) == pytest.approx(1, abs=1e-6)
    sim = enc.similarity(["hard hat"], ["safety helmet", "banana bread"])
    assert sim[0, 0] > sim[0, 1]
    assert "MiniLM" in enc.provenance["similarity_model"]


def test_install_wordnet_replaces_hard_linked_files(tmp_path):
    # a virtualenv copied with hard links: NLTK refuses a multiply-linked file
    import os

    if not (install.DEBIAN_WORDNET / "index.sense").is_file():
        pytest.skip("Debian wordnet-base / wordnet-sense-index not installed")
    target = install.install_wordnet(tmp_path / "a" / "corpora" / "wordnet")
    other = tmp_path / "b"
    other.mkdir()
    for name in ("lexnames", "data.noun"):
        os.link(target / name, other / name)
    assert (target / "lexnames").stat().st_nlink == 2
    install.install_wordnet(target)
    assert all((target / name).stat().st_nlink == 1 for name in ("lexnames", "data.noun"))
    assert (other / "data.noun").read_bytes() == (target / "data.noun").read_bytes()  # the other link untouched
