"""``install-nlp-data``: NLTK's WordNet from Debian's packages, for the offline NLP pieces."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    from lmms_scene.nlp.install import DEBIAN_WORDNET

    p = sub.add_parser(
        "install-nlp-data", help="copy Debian's WordNet database into the venv for NLTK (CESG, grading)",
        description="Copy Debian's wordnet-base / wordnet-sense-index files where NLTK reads them, plus the "
        "lexnames table Debian lacks. No network.",
    )  # fmt: skip
    p.add_argument("--target", type=Path, default=None, help="folder to write (default: sys.prefix/nltk_data/corpora/wordnet)")
    p.add_argument("--source", type=Path, default=DEBIAN_WORDNET, help=f"Debian's WordNet folder (default: {DEBIAN_WORDNET})")
    p.set_defaults(fn=_install, command_name="install-nlp-data")


def _install(args) -> int:
    from lmms_scene.nlp.install import install_wordnet

    path = install_wordnet(args.target, args.source)
    print(f"WordNet installed for NLTK in {path}")
    return 0
