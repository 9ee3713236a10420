"""Files: the one loader of shipped data folders (hardware/, models/, traces/,
benchmarks/measured/, workloads/), the one reader of a user's input file and the one atomic writer.

In an installed wheel they are the packages ``costsim.data.<folder>`` (pyproject maps the
top-level folders there). Imported straight from a checkout (``python -m``, tests run in the
repository root) the top-level folders themselves are used.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from contextlib import contextmanager
from functools import cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

#: The largest input file any command reads whole.
MAX_INPUT_BYTES = 1 << 30


#: Where a data package lives in a checkout, when not at the top level under its own name.
_CHECKOUT = {"measured": "benchmarks/measured"}


@cache
def data_dir(folder: str) -> Traversable:
    """The shipped data folder ``folder`` ('hardware', 'models', 'traces', 'measured' or 'workloads')."""
    try:
        return resources.files(f"costsim.data.{folder}")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parent.parent / _CHECKOUT.get(folder, folder)
        if checkout.is_dir():
            return checkout
        raise


@cache
def code_digest() -> str:
    """SHA-256 of what costsim computes with: its modules (not the CLI's) and its shipped data
    (profiles, traces, measured sets), by relative name and content, so that a checkout and an
    installed wheel of the same code agree. A kept result (a plan's piece, a sweep's cell) is
    reused only under the same digest."""
    h = hashlib.sha256()

    def walk(d, at, suffixes, skip=()):
        for f in sorted(d.iterdir(), key=lambda f: f.name):
            if f.is_dir():
                if f.name not in skip and f.name != "__pycache__":
                    walk(f, f"{at}/{f.name}", suffixes)
            elif f.name.endswith(suffixes):
                h.update(f"{at}/{f.name}".encode())
                h.update(f.read_bytes())

    walk(Path(__file__).resolve().parent, "costsim", (".py",), skip=("data", "cli"))
    for folder in ("hardware", "models", "traces", "measured", "workloads"):
        walk(data_dir(folder), folder, (".toml", ".json", ".jsonl", ".csv"))
    return h.hexdigest()


def read_text(path, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A user's input file as text: UTF-8 (a leading BOM dropped), a regular file (a FIFO, a
    device or a directory is refused at once, never waited on), at most ``max_bytes`` (the one
    cap of every input: :data:`MAX_INPUT_BYTES`, or a reader's own smaller one), refused by its
    size before any of it is read. Failures are ``OSError`` (the callers' one-line errors name
    the file; ``errno.EFBIG`` for one too large, its text naming the cap) or ``UnicodeDecodeError``."""
    return _read_bytes(path, max_bytes).decode("utf-8-sig")


def _size(n: int) -> str:
    """A cap in words: '16 MiB', '1024 MiB', '512 bytes'."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n:,} bytes"


def _read_bytes(path, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of :func:`read_text`, checked the same way."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:  # before fdopen: on a directory it fails itself, naming the descriptor, not the path
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {_size(max_bytes)}", str(path))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


#: The most a compressed input may inflate to: what a plain input may hold. Without a bound a
#: small file that inflates to terabytes (a "zip bomb") would end in an out-of-memory kill.
MAX_DECOMPRESSED_BYTES = MAX_INPUT_BYTES
_GZIP, _ZSTD = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"  # magic numbers; neither can start UTF-8 text


def read_text_decompressed(path) -> str:
    """:func:`read_text`, but a gzip or Zstandard file (told by its first bytes, whatever its
    name) is decompressed first, to at most :data:`MAX_DECOMPRESSED_BYTES`. Zstandard needs the
    optional ``zstandard`` package. Failures are one-line ``OSError`` / ``UnicodeDecodeError``."""
    import io

    data = _read_bytes(path)
    if data.startswith(_GZIP):
        import gzip
        import zlib

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                data = _bounded(f, path)
        except (OSError, EOFError, zlib.error) as e:
            if getattr(e, "errno", None) == errno.EFBIG:
                raise
            raise OSError(errno.EINVAL, f"not a valid gzip file ({e})", str(path)) from None
    elif data.startswith(_ZSTD):
        try:
            import zstandard
        except ImportError:
            raise OSError(errno.EINVAL, "a Zstandard (.zst) file: pip install zstandard to read it",
                          str(path)) from None
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as f:
                data = _bounded(f, path)
        except zstandard.ZstdError as e:
            raise OSError(errno.EINVAL, f"not a valid Zstandard file ({e})", str(path)) from None
    return data.decode("utf-8-sig")


def _bounded(f, path) -> bytes:
    """All of the stream ``f``, or OSError (EFBIG) past :data:`MAX_DECOMPRESSED_BYTES`."""
    chunks, total = [], 0
    while chunk := f.read(1 << 20):
        total += len(chunk)
        if total > MAX_DECOMPRESSED_BYTES:
            raise OSError(errno.EFBIG, f"decompresses to more than {MAX_DECOMPRESSED_BYTES >> 20} MiB", str(path))
        chunks.append(chunk)
    return b"".join(chunks)


def refuse_overwriting_input(path, inputs=(), name: str | None = None) -> None:
    """ValueError, ``'<name>: refusing to overwrite an input file'``, where the output ``path``
    is one of the files ``inputs`` (the same file by any name: a link, another spelling); the one
    check of every writer (the CLI's outputs, :func:`costsim.api.report`). ``name``: the path as
    the message shows it (default: ``path``)."""
    for src in inputs:
        if src is None:
            continue
        try:
            same = os.path.samefile(path, src)
        except (OSError, ValueError):  # either is not there (nothing to overwrite), or no valid path
            same = False
        if same:
            raise ValueError(f"{path if name is None else name}: refusing to overwrite an input file")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file beside it and a
    rename: a reader sees the old file or the new one, never a part. The one way costsim
    writes a file; the new file has the permissions the umask gives."""
    with atomic_file(path) as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


@contextmanager
def atomic_file(path: str | os.PathLike):
    """A binary file to write ``path`` by parts (a large table, chunk by chunk): a temporary
    file beside it, renamed over ``path`` when the block ends, removed if it raises (Ctrl-C
    included). What :func:`write_atomic` writes through."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a normal file respects the umask
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def exclusive(path, what: str):
    """Hold ``<path>.lock`` while this process writes ``path`` (a sweep table, a plan state
    folder): another writer is refused with one line (two sweeps into one table both reported
    success while one grid was lost). A lock whose process is gone (killed) is taken over."""
    path = Path(path)
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
                if pid > 0:
                    os.kill(pid, 0)
            except (ValueError, ProcessLookupError, FileNotFoundError):
                lock.unlink(missing_ok=True)  # its writer is gone
                continue
            except PermissionError:  # alive, another user's
                pass
            raise ValueError(f"{path}: another {what} (process {pid or 'starting'}) is writing it; wait for it to "
                             "finish, or give another path") from None
    else:
        raise ValueError(f"{path}: cannot take its lock {lock.name}")
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield
    finally:
        lock.unlink(missing_ok=True)
