"""The git questions check and retire ask, every one through a :class:`~fleet._runner.Runner`.

Each query runs plain git with a fixed, machine-readable output format. A git failure raises
:class:`GitError`; callers that guard a delete treat any such error as a reason to refuse, never
as "probably fine". Nothing here deletes with ``--force``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._errors import ToolError
from fleet._runner import Completed, Runner, SubprocessRunner

#: Git never prompts (a retire must not hang on a credential prompt) and status never takes
#: the index lock, so a query cannot disturb a worker that is still running git itself.
_GIT_ENV: Final = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
_TIMEOUT: Final = 60.0
#: For the commands that read and hash every file of the worktree (a big checkout takes a
#: while; a timeout refuses, it never passes).
HASH_TIMEOUT: Final = 600.0
#: For commands on a private, temporary index (see :meth:`Git.content_changes`): nothing may
#: vouch for a file's content without reading it (no stat trust, no fsmonitor, no untracked
#: cache), sparse-checkout patterns do not hide paths, and nothing is written beside the
#: repository's own index (no split index).
_FRESH_INDEX_CONFIG: Final = (
    "core.ignoreStat=false",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
    "index.sparse=false",
)
#: Who makes a snapshot commit: fleet, whatever identity the user has configured (or not).
_SNAPSHOT_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "fleet",
    "GIT_AUTHOR_EMAIL": "fleet@localhost",
    "GIT_COMMITTER_NAME": "fleet",
    "GIT_COMMITTER_EMAIL": "fleet@localhost",
}


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
class ContentChange:
    """A path whose content in the worktree differs from HEAD's, found by hashing the file.

    ``flag`` is the index flag that hides it from ``git status`` (``skip-worktree`` or
    ``assume-unchanged``), or None when git's stat cache vouched for the old content."""

    path: str
    kind: str
    flag: str | None = None

    def describe(self) -> str:
        why = self.flag or "a stale stat cache"
        return f"{self.kind} file {self.path} (hidden from git status by {why})"


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
        self,
        cwd: str | os.PathLike[str],
        *args: str,
        ok_codes: Sequence[int] = (0,),
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = None,
    ) -> Completed:
        """Run ``git ARGS`` in ``cwd``; raise GitError unless its exit code is in ``ok_codes``.
        ``env`` adds to the environment (a private index, say); ``timeout`` replaces the
        default for a command that reads the whole worktree."""
        full_env = {**self.env, **env} if env else self.env
        try:
            done = self.runner.run(
                ["git", *args], cwd=cwd, env=full_env, input=input,
                timeout=timeout or self.timeout,
            )
        except ToolError as exc:
            raise GitError(str(exc)) from exc
        except OSError as exc:  # a vanished cwd, for one
            raise GitError(f"git {_what(args, 1)} in {cwd}: {exc.strerror or exc}") from exc
        if done.returncode not in ok_codes:
            lines = done.stderr.strip().splitlines() or done.stdout.strip().splitlines()
            detail = lines[-1].strip() if lines else ""
            # A git that fails without a word still gets a reason that names the command.
            raise GitError(
                f"git {_what(args, 2)} failed (exit {done.returncode})"
                + (f": {detail}" if detail else "")
            )
        return done

    # -- where we are ----------------------------------------------------------------------

    def toplevel(self, path: str | os.PathLike[str]) -> Path:
        return Path(self.run(path, "rev-parse", "--show-toplevel").stdout.strip())

    def git_dir(self, path: str | os.PathLike[str]) -> Path:
        """The worktree's own git dir (``.git/worktrees/<name>`` for a linked worktree)."""
        return Path(self.run(path, "rev-parse", "--absolute-git-dir").stdout.strip())

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

    def index_flags(self, path: str | os.PathLike[str]) -> dict[str, frozenset[str]]:
        """The index entries that carry ``skip-worktree`` or ``assume-unchanged`` (from
        ``git ls-files -v``: ``S`` is skip-worktree, a lower-case tag assume-unchanged)."""
        out = self.run(path, "ls-files", "-v", "-z").stdout
        flags: dict[str, frozenset[str]] = {}
        for item in out.split("\0"):
            if len(item) < 3 or item[1] != " ":
                continue
            tag, name = item[0], item[2:]
            found = set()
            if tag in "Ss":
                found.add("skip-worktree")
            if tag.islower():
                found.add("assume-unchanged")
            if found:
                flags[name] = frozenset(found)
        return flags

    @contextlib.contextmanager
    def fresh_index(
        self, path: str | os.PathLike[str], flags: Mapping[str, frozenset[str]] | None = None
    ) -> Iterator[dict[str, str]]:
        """A private index read from HEAD's tree, with no stat data, so every file in the
        worktree is read and hashed again; yields the environment that selects it. The
        repository's own index is never written.

        An entry that is skip-worktree in the real index and absent from the worktree is what a
        sparse checkout looks like (the file is in HEAD, nothing of it is lost): it stays
        skip-worktree here too. Every other flag is dropped."""
        flags = self.index_flags(path) if flags is None else flags
        with tempfile.TemporaryDirectory(prefix="fleet-index-") as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            self.run(path, *_fresh("read-tree", "HEAD"), env=env)
            sparse = [
                name for name, found in flags.items()
                if "skip-worktree" in found and not os.path.lexists(Path(path, name))
            ]
            if sparse:
                self.run(
                    path, *_fresh("update-index", "--skip-worktree", "-z", "--stdin"),
                    env=env, input="".join(f"{name}\0" for name in sparse),
                )
            yield env

    def content_changes(self, path: str | os.PathLike[str]) -> list[ContentChange]:
        """Every path of HEAD whose worktree content differs from HEAD's, whatever the index's
        flags (skip-worktree, assume-unchanged) or its stat cache say: each file is hashed
        again against a private index read from HEAD."""
        flags = self.index_flags(path)
        with self.fresh_index(path, flags) as env:
            self.run(path, *_fresh("update-index", "-q", "--really-refresh"), env=env,
                     ok_codes=(0, 1), timeout=HASH_TIMEOUT)
            out = self.run(
                path, *_fresh("diff-files", "-z", "--name-status", "--ignore-submodules=none"),
                env=env,
            ).stdout
        parts = out.split("\0")
        changes: list[ContentChange] = []
        for letter, name in zip(parts[::2], parts[1::2], strict=False):
            if not name:
                continue
            kind = {"D": "deleted", "T": "type-changed"}.get(letter[:1], "modified")
            found = flags.get(name, frozenset())
            flag = " and ".join(sorted(found)) or None
            changes.append(ContentChange(path=name, kind=kind, flag=flag))
        return changes

    def ignored(self, path: str | os.PathLike[str]) -> list[str]:
        """The ignored paths under ``path``, a wholly ignored directory once (``build/``)."""
        out = self.run(
            path, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
        ).stdout
        return [name for name in out.split("\0") if name]

    def private_refs(
        self, path: str | os.PathLike[str], prefixes: Sequence[str]
    ) -> list[str]:
        """The refs under ``prefixes`` that this worktree sees (per-worktree namespaces such as
        ``refs/worktree/`` list only the current worktree's own)."""
        out = self.run(
            path, "for-each-ref", "--format=%(refname)", *(p.rstrip("/") for p in prefixes)
        ).stdout
        return [line for line in out.splitlines() if line]

    def reflog(self, path: str | os.PathLike[str], ref: str) -> list[str]:
        """The commits ``ref``'s reflog holds, newest first; empty when it has none."""
        done = self.run(path, "reflog", "show", "--format=%H", "--end-of-options", ref, "--",
                        ok_codes=(0, 128))
        if done.returncode:
            return []
        return [line for line in done.stdout.splitlines() if line]

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
        commit. The ref is created, never overwritten.

        What is saved is the content actually in the worktree: every file of HEAD as it is on
        disk (whatever the index's flags or stat cache say) and every untracked file that is
        not ignored. A worktree that matches HEAD is saved as HEAD itself; any other as a
        commit on top of HEAD whose second parent, when the index holds something else again
        (staged, then edited), is a commit of the index."""
        head = self.head(path)
        head_tree = self.tree(path, head)
        work_tree = self.worktree_tree(path)
        index_tree = self.index_tree(path)
        if work_tree == head_tree and index_tree in (None, head_tree):
            sha = head
        else:
            parents = [head]
            if index_tree not in (None, head_tree, work_tree):
                parents.append(self.commit_tree(path, index_tree, [head], f"index: {message}"))
            sha = self.commit_tree(path, work_tree, parents, message)
        self.run(path, "update-ref", "-m", message, "--create-reflog", ref, sha, "")
        return sha

    def tree(self, path: str | os.PathLike[str], rev: str) -> str:
        return self.run(path, "rev-parse", "--verify", f"{rev}^{{tree}}").stdout.strip()

    def worktree_tree(self, path: str | os.PathLike[str]) -> str:
        """The tree of what is on disk: HEAD's files re-read and every untracked file that is
        not ignored (``git add -A`` on a private index). Writes blobs, never the real index."""
        with self.fresh_index(path) as env:
            self.run(path, *_fresh("add", "-A"), env=env, timeout=HASH_TIMEOUT)
            return self.run(path, *_fresh("write-tree"), env=env).stdout.strip()

    def index_tree(self, path: str | os.PathLike[str]) -> str | None:
        """The tree the real index holds, written from a copy of it (``write-tree`` on the
        index itself would rewrite it under a running worker); None when it cannot be written
        (an unmerged entry) or there is no index."""
        index = self.run(path, "rev-parse", "--path-format=absolute", "--git-path", "index")
        with tempfile.TemporaryDirectory(prefix="fleet-index-") as tmp:
            copy = os.path.join(tmp, "index")
            try:
                shutil.copyfile(index.stdout.strip(), copy)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise GitError(f"could not read the index: {exc.strerror or exc}") from exc
            done = self.run(path, *_fresh("write-tree"), env={"GIT_INDEX_FILE": copy},
                            ok_codes=(0, 128))
        return done.stdout.strip() or None if done.returncode == 0 else None

    def commit_tree(
        self, path: str | os.PathLike[str], tree: str, parents: Sequence[str], message: str
    ) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(path, *args, "-m", message, env=_SNAPSHOT_IDENTITY).stdout.strip()


def printable(text: str) -> str:
    """``text`` fit for a reason, a journal line or JSON: bytes that are not UTF-8 (a file name
    git printed raw) are shown as ``\\xff`` escapes instead of breaking the encoder."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from undecodable bytes
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _fresh(*args: str) -> tuple[str, ...]:
    """``git -c ... ARGS`` with the config every private-index command runs with."""
    config: list[str] = []
    for item in _FRESH_INDEX_CONFIG:
        config += ["-c", item]
    return (*config, *args)


def _what(args: Sequence[str], words: int) -> str:
    """The subcommand (and its first argument), past ``-c key=value`` and ``--git-dir``."""
    rest = list(args)
    while rest and (rest[0] == "-c" or rest[0].startswith("--git-dir=")):
        rest = rest[2:] if rest[0] == "-c" else rest[1:]
    return " ".join(rest[:words])
