"""cronctl's directories made private and refused when others could tamper with them, and
their files opened, written and replaced without following planted links (README, Safety)."""

from __future__ import annotations

import errno
import operator
import os
import stat
from collections.abc import Mapping
from contextlib import suppress
from itertools import accumulate
from pathlib import Path
from typing import TypeVar

from cronctl.errors import UnsafeDirectoryError, UsageError

_PRIVATE_MODE = 0o700
# S_ISGID kept on the directories we create carries a setgid parent's group on downwards.
_GROUP_SHARED_MODE = stat.S_ISGID | 0o750

# What cronctl keeps directly inside a state or lock directory: each one that exists is
# checked with its parent, so a link or a foreign file planted there is refused before use.
_KNOWN_DIRS = ("logs", "notices", "overlap", "claims", "paused", "locks")
_AUDIT_FILE = "audit.jsonl"
_KNOWN_FILES = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal", _AUDIT_FILE)
# Directories whose known children passed, by the directory's (device, inode, mtime).
_CHILDREN_PASSED: dict[str, tuple[int, int, int]] = {}
_P = TypeVar("_P", Path, str)


def ensure_private_dir(path: _P, *, within: Path | None = None) -> _P:
    """Create ``path`` (and missing parents) if needed, check it, and return it; new ones are
    0700, or 2750 under a setgid parent (a group-writable parent is often just a 002 umask).
    With ``within``, each level is checked from ``within`` down before anything is created in
    it, so a link planted at ``logs`` never redirects a write."""
    path = _normal(path)
    if within is None:
        st = _lstat(path)
        if st is None:
            _create_missing(Path(path))
        _verify(path, st)
        _verify_children(path, st)
        return path
    base = ensure_private_dir(within)
    current = str(base)
    # Each level: one lstat (it says both whether to create and what to check), no pathlib.
    for part in _parts_below(str(base), str(path)):
        current = f"{current.rstrip('/')}/{part}"
        st = _lstat(current)
        if st is None:
            _mkdir(Path(current))
        _verify(current, st)
    return path


def _parts_below(base: str, path: str) -> list[str]:
    if path == base:
        return []
    prefix = base if base.endswith("/") else base + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path!r} is not within {base!r}")
    return path[len(prefix) :].split("/")


def _lstat(path: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None  # nothing there; any other failure: _verify lstats again and says why


def verify_dir(path: Path, *, within: Path | None = None) -> bool:
    """Check as :func:`ensure_private_dir` would, creating nothing; False if one is missing."""
    path = _normal(path)
    base = path if within is None else _normal(within)
    # base, then each directory below it down to path
    for directory in accumulate(_parts_below(str(base), str(path)), operator.truediv, initial=base):
        if not os.path.lexists(directory):
            return False
        _verify(directory)
    if within is None:
        _verify_children(path)
    return True


def _normal(path: _P) -> _P:
    # os.path on text, not pathlib: this runs for every log, claim and lock of a run.
    text = os.fspath(path)
    normal = os.path.normpath(text if text.startswith("/") else f"{Path.cwd()}/{text}")
    if normal == text:
        return path
    return Path(normal) if isinstance(path, Path) else normal


def _create_missing(path: Path) -> None:
    for directory in (*reversed(path.parents), path):  # from the root down
        if not os.path.lexists(directory):
            _mkdir(directory)


def _mkdir(directory: Path) -> None:
    try:
        shared = directory.parent.stat().st_mode & stat.S_ISGID
    except OSError:
        shared = 0
    mode = _GROUP_SHARED_MODE if shared else _PRIVATE_MODE
    try:
        directory.mkdir(mode)
    except FileExistsError:
        # Another cronctl started at the same minute won the race; _verify judges the result.
        return
    except OSError as exc:
        raise UnsafeDirectoryError(
            f"cannot create {directory}: {exc.strerror}; create it yourself with mode 0700, "
            f"or choose another directory (--state-dir / --lock-dir).",
            directory,
        ) from exc
    # mkdir honours the umask, and a 077 umask would silently defeat the group sharing.
    # fchmod on an O_NOFOLLOW descriptor: a symlink swapped in meanwhile is never chmod-ed.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _verify(where: Path | str, st: os.stat_result | None = None) -> None:
    if st is None:
        try:
            st = os.lstat(where)
        except OSError as exc:
            message = f"{where}: cannot inspect the directory: {exc.strerror}"
            raise UnsafeDirectoryError(message, Path(where)) from exc
    if _sound_dir(st):
        return
    path = Path(where)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirectoryError(
            f"{path} is a symbolic link; cronctl follows no link in its state or lock "
            f"directory. Point the setting at the real directory ({os.path.realpath(path)}), "
            f"or remove the link if cronctl did not make it.",
            path,
        )
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectoryError(
            f"{path} exists but is not a directory; remove it or choose another path.", path
        )
    _check_owner_and_mode(path, st, "directory")


def _sound_dir(st: os.stat_result) -> bool:
    """What _verify accepts, in one test (group write only on a setgid directory)."""
    mode = st.st_mode
    return (
        stat.S_ISDIR(mode)
        and st.st_uid in (0, os.geteuid())
        and not mode & stat.S_IWOTH
        and not (mode & stat.S_IWGRP and not mode & stat.S_ISGID)
    )


def _verify_children(base: Path | str, seen: os.stat_result | None = None) -> None:
    """Check what cronctl keeps inside ``base`` by lstat only: opening and closing a
    descriptor of ``state.db`` would drop SQLite's locks in this process."""
    seen = seen or _lstat(base)
    # Entries only come and go (or become links) through the directory, which moves its mtime:
    # one unchanged since its children passed needs no second look (asked for every log, lock).
    key = None if seen is None else (seen.st_dev, seen.st_ino, seen.st_mtime_ns)
    if key is not None and _CHILDREN_PASSED.get(str(base)) == key:
        return
    base = Path(base)
    for name in _KNOWN_DIRS:
        child = base / name
        if os.path.lexists(child):
            _verify(child)
    for name in _KNOWN_FILES:
        child = base / name
        try:
            st = os.lstat(child)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UnsafeDirectoryError(f"{child}: cannot inspect: {exc.strerror}", base) from exc
        if not stat.S_ISREG(st.st_mode):
            raise _planted(child, "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a file")
        _check_owner_and_mode(child, st, "file")
    if key is not None:
        _CHILDREN_PASSED[str(base)] = key


def _check_owner_and_mode(path: Path, st: os.stat_result, kind: str) -> None:
    euid, mode, is_dir = os.geteuid(), st.st_mode, kind == "directory"
    if st.st_uid not in (0, euid):
        message = (
            f"{path} is owned by uid {st.st_uid}, not by root or by the user running cronctl "
            f"(uid {euid}); another user may have planted it. Run cronctl as that user, or "
            f"check what it holds, then remove it or `chown {euid} {path}`."
        )
    elif mode & stat.S_IWOTH and is_dir and mode & stat.S_ISVTX:
        # A shared sticky directory such as /tmp is meant for everyone: never advise closing it.
        message = (
            f"{path} is world-writable and sticky, a directory users share (like /tmp), "
            f"where another user could plant cronctl's files; give cronctl a directory of "
            f"its own, e.g. `mkdir -m 700 {path / 'cronctl'}`, and point the setting there."
        )
    elif mode & stat.S_IWOTH:
        message = (
            f"{path} is world-writable (sticky bit or not), so any user could plant "
            f"or replace cronctl's {'files' if is_dir else 'data'}; run `chmod o-w {path}`."
        )
    # A setgid directory is shared with its group on purpose; elsewhere group write is not.
    elif mode & stat.S_IWGRP and not (is_dir and mode & stat.S_ISGID):
        message = (
            f"{path} is writable by its group (gid {st.st_gid}) without being a setgid "
            f"group-shared directory; run `chmod g-w {path}` (or `chmod g+s` on a directory "
            f"that a group shares on purpose)."
        )
    else:
        return
    raise UnsafeDirectoryError(message, path if is_dir else path.parent)


def open_nofollow(
    path: Path | str, flags: int, mode: int = 0o600, *, dir_fd: int | None = None
) -> int:
    """Open a regular file of ours (else UnsafeDirectoryError); with ``dir_fd`` (from
    :func:`open_dir`), by name. A planted link never redirects it, a planted FIFO never hangs."""
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        # With dir_fd, by its last component, as text (pathlib per lock file cost a guarded run).
        name = path if dir_fd is None else os.fspath(path).rpartition("/")[2]
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _planted(Path(path), "a symbolic link") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _planted(Path(path), "not a regular file")
        # What _check_owner_and_mode accepts of a file, in one test (a run opens hundreds).
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
            _check_owner_and_mode(Path(path), st, "file")  # raises, saying what is wrong
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: Path) -> tuple[int, os.stat_result]:
    """A directory's descriptor for ``open_nofollow(..., dir_fd=)``, and its ``fstat``, checked
    by descriptor: a swap since an earlier check is refused, and none can happen from here on."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            _verify(path)  # says what is there instead
        raise
    try:
        st = os.fstat(fd)
        _check_owner_and_mode(path, st, "directory")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _planted(path: Path, what: str) -> UnsafeDirectoryError:
    return UnsafeDirectoryError(
        f"{path} is {what}; cronctl never creates one there, so something else did. "
        f"Remove it and check who can write to {path.parent}.",
        path.parent,
    )


def write_new(path: Path, text: str, force: bool) -> None:
    """Create a file a person asked for (`init`, `import -o`), or with `force` replace it.
    UsageError: it exists, or cannot be written."""
    # Without force, O_EXCL: a file that appeared since the caller's check, or a link even
    # dangling, is left alone. With it, a new file renamed over it (a link too): never half one.
    target = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp") if force else path
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:
        if force:
            raise UsageError(f"cannot write {path}: {target.name} is in the way") from None
        raise UsageError(f"{path} already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if force:
            target.replace(path)
    except OSError as exc:
        if force:
            target.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_file_path(path: Path, *, sticky_ok: bool = False) -> None:
    """Check the way to a file cronctl writes outside its directories (`metrics_file`): below a
    directory others can write to (``/tmp``), each component must be a real directory of root
    or this user, and that directory sticky (else a checked one could be swapped for a link).
    The file's directory must pass the state directories' check or, with ``sticky_ok`` (a file
    opened ``O_NOFOLLOW``), be sticky and ours or root's."""
    path = _normal(path)
    current = Path("/")
    for part in path.parent.parts[1:]:
        parent, current = current, current / part
        try:
            parent_st = parent.stat()
        except FileNotFoundError:
            return  # nothing to write into: the write fails and says so
        if not parent_st.st_mode & (stat.S_IWOTH | stat.S_IWGRP) or _sound_dir(parent_st):
            continue
        st = _lstat(current)
        if st is None:
            return  # nothing to write into: the write fails and says so
        if not parent_st.st_mode & stat.S_ISVTX:
            raise UnsafeDirectoryError(
                f"{parent} can be written by other users and has no sticky bit: they can "
                f"replace {current} with a link after cronctl checked it, to make cronctl "
                f"write {path.name} elsewhere. Put {path} in a directory only root or this "
                f"user can write to (or chmod +t {parent}).",
                parent,
            )
        if stat.S_ISLNK(st.st_mode) or st.st_uid not in (0, os.geteuid()):
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else f"owned by uid {st.st_uid}"
            raise UnsafeDirectoryError(
                f"{current} is {what} in {parent}, which other users can write to: another "
                f"user may have planted it to make cronctl write {path.name} elsewhere. "
                f"Put {path} in a directory only root or this user can write to.",
                current,
            )
    try:
        st = path.parent.stat()
    except OSError:
        return
    if sticky_ok and st.st_mode & stat.S_ISVTX and st.st_uid in (0, os.geteuid()):
        return
    _check_owner_and_mode(path.parent, st, "directory")


def write_atomic(path: Path, data: bytes, mode: int = 0o600, *, durable: bool = True) -> None:
    """Replace ``path`` (a link too, not written through) with ``data`` by renaming a new file
    over it; ``durable`` fsyncs the file, then the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if durable:
                os.fsync(fd)
        tmp.replace(path)
    except BaseException:
        with suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Flush a directory's entries to disk; best effort: some file systems refuse fsync on
    a directory, and failing the run over it would lose more than it protects."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def append_record(state_dir: Path, record: Mapping[str, object]) -> Path:
    """One line of the dashboard's audit record (docs/dashboard.md): one ``write`` on an
    ``O_APPEND`` descriptor (two writers' lines never interleave), synced before the action goes
    ahead (one the record cannot take is not done); ``\\u`` escapes keep a terminal escape inert."""
    import json  # here: `run` never loads json (tests/cli/test_main.py)

    path = ensure_private_dir(state_dir) / _AUDIT_FILE
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
