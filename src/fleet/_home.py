"""Where fleet keeps its files: ``$FLEET_HOME``, or platformdirs' user state dir for "fleet"."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from fleet._core.ids import validate_worker_id

DIR_MODE = 0o700
FILE_MODE = 0o600


def expand(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` and ``~user`` expanded as a shell would; an unknown user leaves it
    as it is (``Path.expanduser`` raises RuntimeError instead)."""
    return Path(os.path.expanduser(path))


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The fleet home: ``home`` if given, else ``$FLEET_HOME``, else the user state dir."""
    if home is not None:
        return expand(home).absolute()
    env = os.environ.get("FLEET_HOME")
    if env:
        return expand(env).absolute()
    return platformdirs.user_state_path("fleet").absolute()


def ensure_dir(path: Path) -> Path:
    """Create ``path`` and whichever of its parents are missing, each 0700 whatever the umask
    (``Path.mkdir(parents=True)`` would leave the parents at the umask's mode: FLEET_HOME and
    ``workers/`` are usually such parents). Directories that exist are left as they are."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if directory.is_dir():  # another process made it first
                continue
            raise
        os.chmod(directory, DIR_MODE)  # exactly 0700, whatever bits the umask took away
    return path


def workers_dir(home: Path) -> Path:
    return home / "workers"


def worker_dir(home: Path, worker: str) -> Path:
    return workers_dir(home) / validate_worker_id(worker)


def journal_path(home: Path, worker: str) -> Path:
    return worker_dir(home, worker) / "journal.jsonl"


def worktree_index_path(home: Path) -> Path:
    """Lines of ``<absolute worktree path>\\t<worker>``: how the hook finds a worker by the
    session's project dir without reading any journal. The last line for a path wins."""
    return home / "worktrees.tsv"


def hook_errors_path(home: Path) -> Path:
    return home / "hook-errors.log"


def cache_dir(home: Path) -> Path:
    return home / "cache"
