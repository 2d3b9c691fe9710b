"""Output files and directories made inside an output directory without
following a link that stands there.

A results directory may be shared, and the emulator runs as root: a link
planted at ``report.html`` or ``plots/`` must not make rtolab write through
it to a file elsewhere. Every writer of the package comes here (the core's
writers do the same in Rust, ``rtolab_sim::out_dir``). A name is opened
relative to its directory's descriptor, never through a path: each
directory on the way is made and opened without following a link (a link
found there is replaced by a directory; a file there is refused), and a
file is written whole to a temporary name in its directory, then renamed
over the name, which replaces a file or a link there and never writes
through it. A process stopped midway leaves the earlier file or none, never
half a file.

The output directory itself may be a link that its user made on purpose:
:func:`open_root` follows it, once, and every later name is below the real
directory it returns.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePath
from typing import IO, TYPE_CHECKING, Any

from rtolab.errors import OutputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Temporary files, ``.NAME.PID.N.tmp`` (the core's are named alike, and
#: earlier versions' sweeps wrote ``.NAME.PID.tmp``): what a killed process
#: leaves behind, which :func:`remove_temporaries` removes.
TEMPORARY = re.compile(r"^\..+\.\d+(\.\d+)?\.tmp$")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_temporaries = itertools.count()


def open_root(path: str | os.PathLike[str]) -> Path:
    """Makes the output directory ``path`` (and its parents) and returns its
    real path. A link at ``path`` is followed here, once: everything written
    afterwards goes below the directory returned."""
    given = Path(path).expanduser()
    try:
        given.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(str(given), "exists and is not a directory") from None
    except OSError as err:
        raise OutputError(str(given), f"cannot create: {err.strerror}") from None
    return given.resolve()


def _parts(root: Path, name: str | os.PathLike[str]) -> tuple[str, ...]:
    """The components of ``name`` below ``root`` (``name`` relative to it, or
    a path below it)."""
    path = PurePath(name)
    if path.is_absolute():
        try:
            path = path.relative_to(root)
        except ValueError:
            raise OutputError(str(name), f"not below the output directory {root}") from None
    parts = path.parts
    if not parts or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise OutputError(str(name), "not a plain name below the output directory")
    return parts


def _subdir(fd: int, name: str, shown: Path) -> int:
    """Opens (making it if missing) the directory ``name`` of the directory
    ``fd`` without following a link; a link there is replaced."""
    for _ in range(2):
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=fd)
        try:
            return os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as err:
            if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise OutputError(str(shown), f"cannot open: {err.strerror}") from None
        if not stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OutputError(str(shown), "exists and is not a directory")
        os.unlink(name, dir_fd=fd)
    raise OutputError(str(shown), "a link keeps coming back at this name")


@contextlib.contextmanager
def _directory(root: Path, parts: Sequence[str]) -> Iterator[int]:
    """A descriptor of ``root/parts...``, each part made and opened without
    following a link."""
    try:
        fd = os.open(root, _DIR)
    except OSError as err:
        raise OutputError(str(root), f"cannot open: {err.strerror}") from None
    try:
        shown = root
        for part in parts:
            shown = shown / part
            inner = _subdir(fd, part, shown)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def make_dir(root: Path, name: str | os.PathLike[str]) -> Path:
    """Makes the directory ``name`` (one or more components) below ``root``
    without following a link on the way; returns its path."""
    parts = _parts(root, name)
    with _directory(root, parts):
        pass
    return root.joinpath(*parts)


@contextlib.contextmanager
def open_file(
    root: Path, name: str | os.PathLike[str], mode: str = "wb", **kwargs: Any
) -> Iterator[IO[Any]]:
    """A file object to write ``name`` below ``root`` whole: it writes a
    temporary file in the directory, renamed over ``name`` when the block
    ends without an error (and removed when it does not). ``mode`` is
    ``"wb"`` or ``"w"`` (with ``encoding`` and the like in ``kwargs``)."""
    parts = _parts(root, name)
    path = root.joinpath(*parts)
    with _directory(root, parts[:-1]) as fd:
        temporary, file_fd = _temporary(fd, parts[-1], path)
        try:
            with os.fdopen(file_fd, mode, **kwargs) as file:
                yield file
            try:
                os.replace(temporary, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
            except IsADirectoryError:
                raise OutputError(str(path), "is a directory") from None
            except OSError as err:
                raise OutputError(str(path), f"cannot write: {err.strerror}") from None
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=fd)
            raise


def _temporary(fd: int, name: str, shown: Path) -> tuple[str, int]:
    """Creates a new, empty temporary file for ``name`` in the directory
    ``fd``; returns its name and descriptor."""
    while True:
        temporary = f".{name}.{os.getpid()}.{next(_temporaries)}.tmp"
        try:
            return temporary, os.open(temporary, _NEW, 0o666, dir_fd=fd)
        except FileExistsError:
            continue  # left by an earlier process of the same id
        except OSError as err:
            raise OutputError(str(shown), f"cannot write: {err.strerror}") from None


def write_bytes(root: Path, name: str | os.PathLike[str], data: bytes) -> Path:
    """Writes ``data`` to ``name`` below ``root`` (see :func:`open_file`);
    returns the file's path."""
    with open_file(root, name, "wb") as file:
        file.write(data)
    return root.joinpath(*_parts(root, name))


def write_text(root: Path, name: str | os.PathLike[str], text: str) -> Path:
    """Writes ``text`` (UTF-8) to ``name`` below ``root``; returns its path."""
    return write_bytes(root, name, text.encode("utf-8"))


def write_with(
    root: Path, name: str | os.PathLike[str], write: Callable[[IO[bytes]], object]
) -> Path:
    """Writes ``name`` below ``root`` with ``write(file)`` (a library's writer
    given a binary file object: pandas, pyarrow, matplotlib); returns its path."""
    with open_file(root, name, "wb") as file:
        write(file)
    return root.joinpath(*_parts(root, name))


def save_figure(fig: Figure, root: Path, name: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Saves a matplotlib figure as PNG to ``name`` below ``root``: a figure
    stopped midway leaves no truncated PNG."""
    return write_with(root, name, lambda file: fig.savefig(file, format="png", **kwargs))


def remove(root: Path, name: str | os.PathLike[str]) -> None:
    """Removes the file, link or directory tree ``name`` below ``root``, if
    there; a link is removed, never followed."""
    parts = _parts(root, name)
    with _directory(root, parts[:-1]) as fd:
        try:
            mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        try:
            if stat.S_ISDIR(mode):
                _remove_tree(fd, parts[-1])
            else:
                os.unlink(parts[-1], dir_fd=fd)
        except OSError as err:
            raise OutputError(
                str(root.joinpath(*parts)), f"cannot remove: {err.strerror}"
            ) from None


def _remove_tree(fd: int, name: str) -> None:
    """Removes the directory ``name`` of the directory ``fd`` and all it
    holds, by descriptors: a link inside is removed, never followed."""
    for _, dirs, files, inner in os.fwalk(name, topdown=False, dir_fd=fd):
        for file in files:
            os.unlink(file, dir_fd=inner)
        for sub in dirs:
            try:
                os.rmdir(sub, dir_fd=inner)
            except NotADirectoryError:  # a link to a directory
                os.unlink(sub, dir_fd=inner)
    os.rmdir(name, dir_fd=fd)


def remove_temporaries(root: Path, name: str | os.PathLike[str] | None = None) -> list[str]:
    """Removes the temporary files that killed processes left in ``root``
    (or its directory ``name``); returns their names. Only for a directory
    no other process is writing to."""
    removed: list[str] = []
    parts = _parts(root, name) if name is not None else ()
    with _directory(root, parts) as fd:
        for entry in os.listdir(fd):
            if TEMPORARY.match(entry):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=fd)
                    removed.append(entry)
    return removed


def links_below(root: Path, depth: int | None = None) -> list[Path]:
    """Every link in the tree of ``root``, down ``depth`` levels (all when
    ``None``; 1: ``root``'s own entries), none of them followed: rtolab
    makes no link in an output directory, so one there was put there by
    someone else."""
    found = []
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        level = len(here.relative_to(root).parts) + 1
        found += [here / n for n in sorted(dirs + files) if (here / n).is_symlink()]
        if depth is not None and level >= depth:
            dirs.clear()
    return found
