"""What every builder does with the files of a release: paths confined to the release
folder, images decoded in full.

A release is someone else's folder and nothing in it is trusted. :func:`inside` resolves
a file name a metadata row gives (an ``image`` field, a scene id that names a folder)
inside the release folder only: an absolute path, a ``..`` component, or a symbolic link
that leads out of the folder is an error naming the row, the field and the value (a
metadata row ``"image": "/etc/passwd"`` would otherwise put that file's bytes into the
dataset). :func:`decode_image` opens image bytes and decodes every pixel, refusing a file
that is not an image (an HTML error page, a 2 KB stub) or is cut short (a JPEG cut to
60%) with the file named. It never touches PIL's global ``ImageFile.LOAD_TRUNCATED_IMAGES``
(lmms-eval switches it on at import, and other threads may be decoding): a truncated
JPEG is recognised by the end-of-image marker PIL has to invent for it, a PNG by walking
its chunks (lengths, CRCs, a complete zlib stream, ``IEND``), and WebP's decoder is strict
by itself. Other formats are refused, saying how to convert them.

>>> import io; from PIL import Image
>>> buffer = io.BytesIO(); Image.new("RGB", (4, 3)).save(buffer, "PNG")
>>> decode_image(buffer.getvalue(), "a.png").size
(4, 3)
>>> decode_image(buffer.getvalue()[:-12], "a.png")
Traceback (most recent call last):
...
ValueError: image a.png cannot be decoded in full (a PNG cut short: no IEND chunk); the file is truncated or corrupt (57 bytes): replace it with the released file
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from PIL import Image, UnidentifiedImageError

#: the image formats whose complete decoding can be checked (see the module docstring)
FORMATS = ("JPEG", "PNG", "WEBP")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def inside(folder: str | Path, value: Any, where: str, field: str) -> Path:
    """The file (or folder) ``value`` names, as a path inside the release ``folder``.

    ``value`` must be a non-empty relative path: an absolute path (POSIX or Windows), a
    ``..`` component, or a path whose resolved form (symbolic links followed) is outside
    ``folder`` is a ``ValueError`` naming ``where`` (the row), ``field`` and the value. The
    returned path is ``folder / value`` (not resolved: messages show the release's own
    names); whether it exists is the caller's check."""
    prefix = f"{where}: field {field!r}" if where else f"field {field!r}"
    if not isinstance(value, str):
        raise ValueError(
            f"{prefix}: expected a file name relative to the release folder, got {type(value).__name__} {_show(value)}"
        )
    if not value.strip():
        raise ValueError(f"{prefix}: expected a file name relative to the release folder, got {value!r}")
    if "\x00" in value:
        raise ValueError(f"{prefix}: {_show(value)} contains a NUL character")
    posix, windows = PurePosixPath(value), PureWindowsPath(value)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or value.startswith(("/", "\\", "~")):
        raise ValueError(
            f"{prefix}: {value!r} is an absolute path; give a path relative to the release folder {folder}"
        )
    if ".." in posix.parts or ".." in windows.parts:
        raise ValueError(f"{prefix}: {value!r} leaves the release folder ('..'); give a path inside {folder}")
    root = Path(folder).resolve()
    path = Path(folder) / posix
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ValueError(
            f"{prefix}: {value!r} resolves to {resolved}, outside the release folder {root} "
            f"(a symbolic link that leads out of it); copy the file into the release"
        )
    return path


def read_file(folder: str | Path, value: Any, where: str, field: str) -> tuple[Path, bytes]:
    """``(path, bytes)`` of the file ``value`` names inside ``folder`` (:func:`inside`); a
    missing file or a folder is a ``FileNotFoundError`` naming the row, field and path."""
    path = inside(folder, value, where, field)
    if not path.is_file():
        prefix = f"{where}: field {field!r}" if where else f"field {field!r}"
        raise FileNotFoundError(f"{prefix}: no such file {path}")
    return path, path.read_bytes()


def _png_problem(data: bytes) -> str | None:
    """Why ``data`` is not a complete PNG (chunk lengths, CRCs, IHDR first, IDAT before
    IEND, a zlib stream that ends), or None."""
    if not data.startswith(_PNG_SIGNATURE):
        return "no PNG signature"
    pos, first, idat, seen_end = len(_PNG_SIGNATURE), True, [], False
    while pos < len(data):
        if pos + 8 > len(data):
            return "a PNG cut short inside a chunk header"
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if end > len(data):
            return f"a PNG cut short inside its {kind.decode('latin-1')!r} chunk"
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : end])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            return f"a PNG whose {kind.decode('latin-1')!r} chunk fails its CRC"
        if first and kind != b"IHDR":
            return "a PNG that does not start with IHDR"
        first = False
        if kind == b"IDAT":
            idat.append(body)
        pos = end
        if kind == b"IEND":
            seen_end = True
            break
    if not seen_end:
        return "a PNG cut short: no IEND chunk"
    if not idat:
        return "a PNG without image data (no IDAT chunk)"
    stream = zlib.decompressobj()
    try:
        for part in idat:
            # a megabyte at a time: the pixels are checked, never held
            stream.decompress(part, 1 << 20)
            while stream.unconsumed_tail:
                stream.decompress(stream.unconsumed_tail, 1 << 20)
    except zlib.error as exc:
        return f"a PNG whose image data does not decompress ({exc})"
    if not stream.eof:
        return "a PNG whose image data stream is cut short"
    return None


def decode_image(data: bytes, label: str):
    """Open ``data`` and decode every pixel; returns the loaded PIL image. A file that is
    not an image, is cut short or corrupt, is in a format whose completeness cannot be
    checked (:data:`FORMATS`) or is a decompression bomb is a ``ValueError`` naming
    ``label`` (the file). Never reads or sets PIL's ``LOAD_TRUNCATED_IMAGES``."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"image {label}: expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)

    def refuse(why: str) -> ValueError:
        return ValueError(
            f"image {label} cannot be decoded in full ({why}); the file is truncated or corrupt "
            f"({len(data)} bytes): replace it with the released file"
        )

    try:
        pil = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        head = data[:24]
        raise refuse(f"not an image file: it starts with {head!r}") from None
    except Image.DecompressionBombError as exc:
        raise ValueError(f"image {label}: {exc}") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise refuse(f"{type(exc).__name__}: {exc}") from None
    if pil.format not in FORMATS:
        raise ValueError(
            f"image {label}: format {pil.format} is not one lmms-scene can check for completeness "
            f"({', '.join(FORMATS)}); convert it, e.g. with PIL: Image.open(f).save('x.png')"
        )
    if pil.format == "PNG":
        problem = _png_problem(data)
        if problem:
            raise refuse(problem)
    try:
        pil.load()  # every pixel, not only the header
    except Image.DecompressionBombError as exc:
        raise ValueError(f"image {label}: {exc}") from None
    except (OSError, SyntaxError, ValueError, struct.error, IndexError) as exc:
        raise refuse(f"{type(exc).__name__}: {exc}") from None
    # with LOAD_TRUNCATED_IMAGES on, PIL finishes a cut JPEG by inventing its end marker
    # and says so on the image; with it off, load() above raised
    if pil.format == "JPEG" and getattr(pil, "_ended", False):
        raise refuse("a JPEG cut short: the decoder ran out of data before the end-of-image marker")
    return pil


def check_loaded(image: Any, label: str) -> Any:
    """A PIL image someone else opened (a ``datasets`` Image column decodes as it likes):
    loaded, and refused when PIL had to invent the end of a cut JPEG."""
    try:
        image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"image {label} cannot be decoded in full ({type(exc).__name__}: {exc})") from None
    if getattr(image, "format", None) == "JPEG" and getattr(image, "_ended", False):
        raise ValueError(f"image {label} cannot be decoded in full (a JPEG cut short: the decoder ran out of data)")
    return image


def image_cell_bytes(value: Any, where: str, field: str, roots: Iterable[str | Path] = ()) -> tuple[bytes, str]:
    """The bytes of one undecoded ``datasets`` Image cell (``{"bytes", "path"}``) and a
    label for messages. A cell without bytes names a file on this machine: it is read only
    when it lies inside one of ``roots`` (the local folder the dataset came from, the hub
    caches); otherwise it is an error naming the row, the field and the path."""
    at = f"{where}: field {field!r}" if where else f"field {field!r}"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), at
    if not isinstance(value, dict):
        raise ValueError(f"{at}: expected an image, got {type(value).__name__} {_show(value)}")
    data, path = value.get("bytes"), value.get("path")
    label = at + (f" ({Path(str(path)).name})" if path else "")
    if data is not None:
        return bytes(data), label
    if not path:
        raise ValueError(f"{at}: no image (neither bytes nor a path)")
    resolved = Path(str(path)).expanduser().resolve()
    for root in roots:
        base = Path(root).expanduser().resolve()
        if resolved == base or base in resolved.parents:
            if not resolved.is_file():
                raise FileNotFoundError(f"{at}: no such file {resolved}")
            return resolved.read_bytes(), label
    raise ValueError(
        f"{at}: the image is a path on this machine ({path!r}) instead of bytes, outside "
        f"the dataset's own folder; a dataset must carry its images"
    )


def hub_roots() -> list[Path]:
    """Where ``datasets`` and ``huggingface_hub`` keep downloaded files (an image column
    of a hub dataset stored as files points there)."""
    roots: list[Path] = []
    try:
        from datasets import config  # deferred: datasets (pyarrow, pandas) is heavy to import

        roots.append(Path(config.HF_DATASETS_CACHE))
    except Exception:  # pragma: no cover - datasets is a dependency
        pass
    try:
        from huggingface_hub import constants  # deferred: huggingface_hub is heavy to import

        roots.append(Path(constants.HF_HUB_CACHE))
    except Exception:  # pragma: no cover
        pass
    return roots


def decode_row_image(cell: Any, where: str) -> tuple[Any, str | None]:
    """A loaded row's ``image`` cell decoded in full: ``(image, None)``, or ``(None, the
    problem)`` naming the row and field (the load-time re-check of every builder)."""
    try:
        data, _ = image_cell_bytes(cell, where, "image", hub_roots())
    except (ValueError, OSError) as exc:
        return None, str(exc)
    name = Path(str(cell["path"])).name if isinstance(cell, Mapping) and cell.get("path") else "(the row's bytes)"
    try:
        return decode_image(data, name), None
    except ValueError as exc:
        return None, f"{where}: field 'image': {exc}"
