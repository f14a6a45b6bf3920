"""The git questions check and retire ask, every one through a :class:`~fleet._runner.Runner`.

Each query runs plain git with a fixed, machine-readable output format. A git failure raises
:class:`GitError`; callers that guard a delete treat any such error as a reason to refuse, never
as "probably fine". Nothing here deletes with ``--force``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._errors import ToolError
from fleet._runner import Completed, Runner, SubprocessRunner

#: Git never prompts (a retire must not hang on a credential prompt) and status never takes
#: the index lock, so a query cannot disturb a worker that is still running git itself.
_GIT_ENV: Final = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
_TIMEOUT: Final = 60.0


class GitError(ToolError):
    """A git command failed, or printed something this module cannot read."""


@attrs.frozen(kw_only=True)
class StatusEntry:
    """One line of ``git status --porcelain``: ``xy`` is the two status letters."""

    xy: str
    path: str
    orig: str | None = None

    @property
    def untracked(self) -> bool:
        return self.xy == "??"

    @property
    def staged(self) -> bool:
        return not self.untracked and self.xy[0] not in " ?!"

    def describe(self) -> str:
        if self.untracked:
            return f"untracked file {self.path}"
        if self.xy[0] == "U" or self.xy[1] == "U" or self.xy in ("AA", "DD"):
            return f"unmerged file {self.path}"
        if self.staged:
            return f"staged file {self.path}"
        if self.xy[1] == "D":
            return f"deleted file {self.path}"
        return f"modified file {self.path}"


@attrs.frozen(kw_only=True)
class Upstream:
    """A branch's upstream: the local tracking ref (``refs/remotes/origin/x``), the remote's
    name and the branch ref on that remote (``refs/heads/x``)."""

    ref: str
    remote: str
    remote_ref: str

    @property
    def short(self) -> str:
        prefix = "refs/remotes/"
        return self.ref[len(prefix) :] if self.ref.startswith(prefix) else self.ref


@attrs.frozen(kw_only=True)
class WorktreeEntry:
    """One worktree of a repository, from ``git worktree list --porcelain``."""

    path: Path
    head: str | None = None
    branch: str | None = None
    detached: bool = False
    bare: bool = False
    locked: str | None = None
    prunable: str | None = None


@attrs.frozen(kw_only=True)
class Commit:
    sha: str
    subject: str

    def oneline(self) -> str:
        return f"{self.sha[:7]} {self.subject}"


class Git:
    """git, run through a runner, with ``GIT_TERMINAL_PROMPT=0`` and no optional locks."""

    def __init__(self, runner: Runner | None = None, *, timeout: float = _TIMEOUT) -> None:
        self.runner: Runner = runner or SubprocessRunner()
        self.timeout = timeout
        self.env: Mapping[str, str] = {**os.environ, **_GIT_ENV}

    def run(
        self, cwd: str | os.PathLike[str], *args: str, ok_codes: Sequence[int] = (0,)
    ) -> Completed:
        """Run ``git ARGS`` in ``cwd``; raise GitError unless its exit code is in ``ok_codes``."""
        try:
            done = self.runner.run(["git", *args], cwd=cwd, env=self.env, timeout=self.timeout)
        except ToolError as exc:
            raise GitError(str(exc)) from exc
        except OSError as exc:  # a vanished cwd, for one
            what = args[0] if args else ""
            raise GitError(f"git {what} in {cwd}: {exc.strerror or exc}") from exc
        if done.returncode not in ok_codes:
            detail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])
            raise GitError(
                f"git {' '.join(args[:2])} failed (exit {done.returncode}): {detail[-1].strip()}"
            )
        return done

    # -- where we are ----------------------------------------------------------------------

    def toplevel(self, path: str | os.PathLike[str]) -> Path:
        return Path(self.run(path, "rev-parse", "--show-toplevel").stdout.strip())

    def common_dir(self, path: str | os.PathLike[str]) -> Path:
        """The repository's shared git dir (the main repo's ``.git`` for a linked worktree)."""
        out = self.run(path, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout
        return Path(out.strip())

    def head(self, path: str | os.PathLike[str]) -> str:
        return self.run(path, "rev-parse", "--verify", "HEAD^{commit}").stdout.strip()

    def resolve(self, path: str | os.PathLike[str], rev: str) -> str | None:
        """The commit ``rev`` names, or None when it names none."""
        done = self.run(
            path, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
            ok_codes=(0, 1),
        )
        return done.stdout.strip() or None if done.returncode == 0 else None

    def branch(self, path: str | os.PathLike[str]) -> str | None:
        """The checked-out branch (``feature``), or None for a detached HEAD."""
        done = self.run(path, "symbolic-ref", "--quiet", "HEAD", ok_codes=(0, 1))
        ref = done.stdout.strip()
        if done.returncode == 1 or not ref:
            return None
        return ref.removeprefix("refs/heads/")

    def upstream(self, path: str | os.PathLike[str], branch: str) -> Upstream | None:
        out = self.run(
            path,
            "for-each-ref",
            "--format=%(upstream)%00%(upstream:remotename)%00%(upstream:remoteref)",
            f"refs/heads/{branch}",
        ).stdout.strip("\n")
        if not out:
            raise GitError(f"no branch {branch!r}")
        ref, remote, remote_ref = ([*out.split("\0"), "", ""])[:3]
        if not ref:
            return None
        return Upstream(ref=ref, remote=remote, remote_ref=remote_ref)

    # -- what changed ----------------------------------------------------------------------

    def status(self, path: str | os.PathLike[str]) -> list[StatusEntry]:
        """Every modified, staged and untracked path (each untracked file, not its directory);
        ignored files are not listed."""
        out = self.run(
            path,
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
        ).stdout
        parts = out.split("\0")
        entries: list[StatusEntry] = []
        i = 0
        while i < len(parts):
            item = parts[i]
            i += 1
            if not item:
                continue
            if len(item) < 4 or item[2] != " ":
                raise GitError(f"unexpected git status line {item!r}")
            xy, name = item[:2], item[3:]
            orig = None
            if "R" in xy or "C" in xy:
                orig = parts[i] if i < len(parts) else None
                i += 1
            entries.append(StatusEntry(xy=xy, path=name, orig=orig))
        return entries

    def count(self, path: str | os.PathLike[str], *revs: str) -> int:
        out = self.run(path, "rev-list", "--count", *revs, "--").stdout.strip()
        try:
            return int(out)
        except ValueError as exc:
            raise GitError(f"git rev-list --count printed {out!r}") from exc

    def commits(self, path: str | os.PathLike[str], base: str, head: str) -> list[Commit]:
        out = self.run(path, "log", "--format=%H%x00%s", f"{base}..{head}", "--").stdout
        commits = []
        for line in out.splitlines():
            sha, _, subject = line.partition("\0")
            if sha:
                commits.append(Commit(sha=sha, subject=subject))
        return commits

    def has_commit(self, path: str | os.PathLike[str], sha: str) -> bool:
        done = self.run(path, "cat-file", "-e", f"{sha}^{{commit}}", ok_codes=(0, 1, 128))
        return done.returncode == 0

    def is_ancestor(self, path: str | os.PathLike[str], ancestor: str, descendant: str) -> bool:
        done = self.run(path, "merge-base", "--is-ancestor", ancestor, descendant, ok_codes=(0, 1))
        return done.returncode == 0

    def ls_remote(self, path: str | os.PathLike[str], remote: str, ref: str) -> str | None:
        """What ``ref`` is on ``remote`` right now (asking the remote, not the tracking ref), or
        None when the remote has no such ref."""
        done = self.run(path, "ls-remote", "--exit-code", remote, ref, ok_codes=(0, 2))
        if done.returncode == 2:
            return None
        for line in done.stdout.splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def fetch(self, path: str | os.PathLike[str], remote: str, ref: str) -> None:
        """Fetch one ref's commits (no tags); the tracking ref may move, nothing else does."""
        self.run(path, "fetch", "--quiet", "--no-tags", "--end-of-options", remote, ref)

    # -- worktrees -------------------------------------------------------------------------

    def worktrees(self, path: str | os.PathLike[str]) -> list[WorktreeEntry]:
        out = self.run(path, "worktree", "list", "--porcelain").stdout
        entries: list[WorktreeEntry] = []
        for block in out.strip("\n").split("\n\n"):
            fields: dict[str, str] = {}
            for line in block.splitlines():
                key, _, value = line.partition(" ")
                fields[key] = value
            if "worktree" not in fields:
                continue
            branch = fields.get("branch")
            entries.append(
                WorktreeEntry(
                    path=Path(fields["worktree"]),
                    head=fields.get("HEAD"),
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    detached="detached" in fields,
                    bare="bare" in fields,
                    locked=fields.get("locked") if "locked" in fields else None,
                    prunable=fields.get("prunable") if "prunable" in fields else None,
                )
            )
        return entries

    def worktree_remove(
        self, repo: str | os.PathLike[str], worktree: str | os.PathLike[str]
    ) -> None:
        """``git worktree remove`` without ``--force``: git itself refuses a worktree with
        modified or untracked files, or a locked one."""
        self.run(repo, "worktree", "remove", os.fspath(worktree))

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, path: str | os.PathLike[str], ref: str, message: str) -> str:
        """Save the worktree's state under ``ref`` (in the shared repository) and return the
        commit. A dirty worktree is saved as a stash-like commit of its index and tracked files;
        a clean one as its HEAD. The ref is created, never overwritten."""
        stash = self.run(path, "stash", "create", message).stdout.strip()
        sha = stash or self.head(path)
        self.run(path, "update-ref", "-m", message, "--create-reflog", ref, sha, "")
        return sha
