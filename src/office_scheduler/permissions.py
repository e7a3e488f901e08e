"""Owner-only file modes for the data directory and the SQLite database.

The database holds executor ``env`` secrets, webhook secrets and token hashes, and the
data directory holds the first admin token: ``OFFICE_HOME`` is created 0700 and a SQLite
database file 0600 (SQLite gives its ``-wal`` and ``-shm`` files the database file's
mode). Files that already exist are never changed; :func:`loose_modes` lists those that
others can read, for a warning at startup.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Mode of a new data directory (owner only).
HOME_MODE = 0o700
#: Mode of a new SQLite database file (owner read/write).
DATABASE_MODE = 0o600
#: Files next to a SQLite database that carry its data.
SQLITE_SIDE_FILES = ("-wal", "-shm")


def ensure_home(path: Path) -> Path:
    """Create the data directory ``path`` (and missing parents) with mode 0700.

    An existing directory keeps its mode (see :func:`loose_modes`).

    Raises:
        OSError: the directory cannot be created.
    """
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=HOME_MODE)
        path.chmod(HOME_MODE)  # mkdir's mode is filtered by the umask
    return path


def create_private_file(path: Path) -> None:
    """Create an empty file at ``path`` with mode 0600 when none exists yet.

    Raises:
        OSError: the file cannot be created (e.g. its directory is missing).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def sqlite_files(database: Path) -> list[Path]:
    """The database file and its WAL/SHM files (whether or not they exist)."""
    return [database, *(Path(f"{database}{suffix}") for suffix in SQLITE_SIDE_FILES)]


def loose_modes(home: Path | None, database: Path | None) -> list[str]:
    """Describe the data directory and SQLite files that others than the owner can access.

    Args:
        home: the data directory (``None``: not checked).
        database: the SQLite database file (``None``: a server database, not checked).

    Returns:
        One line per path, e.g. ``/srv/office/office.db is 0644 (want 0600)``; empty when
        all is private or missing.
    """
    found: list[str] = []
    checks: list[tuple[Path, int]] = []
    if home is not None:
        checks.append((home, HOME_MODE))
    if database is not None:
        checks += [(path, DATABASE_MODE) for path in sqlite_files(database)]
    for path, wanted in checks:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            found.append(f"{path} is {mode:04o} (want {wanted:04o})")
    return found
