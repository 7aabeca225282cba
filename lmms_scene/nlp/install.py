"""Install NLTK's WordNet data from Debian's WordNet packages (no network).

NLTK's downloader needs the internet; Debian's ``wordnet-base`` and
``wordnet-sense-index`` carry the same WordNet 3.0 database under ``/usr/share/wordnet``.
NLTK's reader wants the files in ``<nltk_data>/corpora/wordnet/`` (copies: it refuses
symlinks that leave its root) plus the standard ``lexnames`` table, which Debian lacks.

    lmms-scene install-nlp-data                 # into sys.prefix/nltk_data (the venv)
    lmms-scene install-nlp-data --target DIR    # (or python -m lmms_scene.nlp.install ...)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

#: where Debian's wordnet-base / wordnet-sense-index put the database
DEBIAN_WORDNET = Path("/usr/share/wordnet")
#: the files NLTK's WordNetCorpusReader opens
FILES = (
    *(f"{kind}.{pos}" for kind in ("data", "index") for pos in ("adj", "adv", "noun", "verb")),
    *(f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")),
    "index.sense",
    "cntlist.rev",
)
# WordNet 3.0's lexicographer files (lexnames(5WN)): number, name, syntactic category.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The 45-line ``lexnames`` file: ``NN<TAB>name<TAB>category``."""
    assert len(LEXNAMES) == 45
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def default_target() -> Path:
    # NLTK searches sys.prefix/nltk_data, so the venv's copy needs no environment variable.
    return Path(sys.prefix) / "nltk_data" / "corpora" / "wordnet"


def install_wordnet(target: Path | None = None, source: Path = DEBIAN_WORDNET) -> Path:
    """Copy the WordNet database from ``source`` into ``target`` and write ``lexnames``.
    Idempotent. Raises FileNotFoundError saying which Debian packages to install."""
    target = Path(target) if target is not None else default_target()
    missing = [f for f in FILES if not (source / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"WordNet database files missing under {source}: {', '.join(missing)}; "
            "install them with `apt-get install wordnet-base wordnet-sense-index` (Debian/Ubuntu)"
        )
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        src, dst = source / name, target / name
        # NLTK refuses a multiply-linked file (a hard link may point outside its root): a
        # copied-with-links virtualenv gets fresh copies (unlinked first, the other link untouched)
        if dst.is_file() and dst.stat().st_nlink > 1:
            dst.unlink()
        if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
    lexnames = target / "lexnames"
    if lexnames.is_file() and lexnames.stat().st_nlink > 1:
        lexnames.unlink()
    lexnames.write_text(lexnames_text())
    return target


if __name__ == "__main__":  # `python -m lmms_scene.nlp.install` = `lmms-scene install-nlp-data`
    from lmms_scene.cli import main

    sys.exit(main(["install-nlp-data", *sys.argv[1:]]))
