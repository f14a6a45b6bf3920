"""Building workers in real git repositories with a local bare origin."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from fleet import Fleet, HookEvent
from fleet._retire import Outcome, Retirer
from tests.conftest import Repo, git

DONE_MESSAGE = "All done.\n\nFLEET_WORKER_DONE: added the feature"


def add_worktree(repo: Repo, name: str, *, branch: str | None = None) -> Path:
    """A linked worktree of ``repo`` on a new branch from main."""
    path = repo.path.parent / f"wt-{name}"
    repo.git("worktree", "add", "-q", "-b", branch or f"fleet/{name}", str(path), "main")
    return path


def commit(path: Path, name: str = "feature.txt", text: str = "work\n", msg: str = "work") -> str:
    target = path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(path, "add", name)
    git(path, "commit", "-q", "-m", msg)
    return git(path, "rev-parse", "HEAD")


def push(path: Path) -> None:
    git(path, "push", "-q", "-u", "origin", "HEAD")


def register(fleet: Fleet, worker: str, worktree: Path, branch: str, *, done: bool = True) -> None:
    fleet.register(worker, worktree=worktree, branch=branch, base="main", profile="claude:work",
                   model="sonnet", tool="claude")
    if done:
        claim(fleet, worker)


def claim(fleet: Fleet, worker: str) -> None:
    fleet.record(
        worker,
        HookEvent(
            ts=fleet.clock.now(), src="claude", hook="Stop",
            data={"last_assistant_message": DONE_MESSAGE, "session_id": "s1"},
        ),
    )


def finished_worker(fleet: Fleet, repo: Repo, worker: str) -> Path:
    """A worker that committed, pushed and claimed done: safe to retire."""
    path = add_worktree(repo, worker)
    commit(path)
    push(path)
    register(fleet, worker, path, f"fleet/{worker}")
    return path


def ls_refs(repo: Repo, prefix: str = "refs/fleet/") -> list[str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", prefix], cwd=repo.path,
        check=True, capture_output=True, text=True,
    ).stdout
    return out.split()


def exclude(wt: Path, *patterns: str) -> None:
    """Ignore ``patterns`` through the repository's info/exclude (no tracked file changes)."""
    info = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "info"
    info.mkdir(exist_ok=True)
    with (info / "exclude").open("a") as fh:
        fh.write("".join(f"{p}\n" for p in patterns))


def retire(fleet: Fleet, worker: str, **kwargs: Any) -> Outcome:
    """Assess and retire ``worker`` with a :class:`Retirer` built with ``kwargs``."""
    return Retirer(fleet, **kwargs).retire_worker(worker)
