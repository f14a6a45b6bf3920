"""What ``fleet mcp`` may act on, and what never leaves it.

The server acts only within its fleet home and the git repositories it was told to use (each
``--repo``, else the repository it was started in). A repository's linked worktrees count as
part of it (fleet puts them beside the repository), found by git's common dir, so a worker is
in scope when its worktree belongs to one of those repositories. A file a tool names (a brief,
a follow-up, a tasks file) must lie inside one of them or inside the fleet home.

Tools never run a shell command taken from their arguments, except ``check``'s explicit check
commands: a key source a tool names may be ``env:NAME`` or ``keyring:SERVICE/USER``, never
``command:CMD`` (the server's own ``--key-from``, set by whoever configured it, may be any).
Keys never appear in results: every value of a variable a key source names, and of the usual
credential variables, is replaced by ``[redacted]`` in whatever a tool returns.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import attrs

from fleet._errors import FleetError, Refused, SettingsError
from fleet._git import Git, GitError
from fleet._home import expand
from fleet._keys import parse_key_source

#: Credential variables whose values never appear in a result, whatever a tool was given.
CREDENTIAL_VARS: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "FLEET_ENDPOINT_API_KEY",
)
REDACTED: Final = "[redacted]"
#: Shorter values are not keys, and replacing them would garble results.
MIN_SECRET: Final = 8


class OutOfScope(Refused):
    """A repository, worker or file outside what the server was told to act on."""


@attrs.frozen(kw_only=True)
class Repository:
    path: Path  # the main worktree's top level, symlinks resolved
    common_dir: Path  # git's common dir, symlinks resolved


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(expand(path)))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def find_repository(path: str | os.PathLike[str], git: Git | None = None) -> Repository:
    """The repository ``path`` is in (a linked worktree gives its main repository)."""
    git = git or Git()
    where = _real(path)
    if not where.is_dir():
        raise SettingsError(f"repository {path} is not a directory")
    try:
        common = _real(git.common_dir(where))
        top = _real(git.toplevel(where))
    except GitError:
        raise SettingsError(f"{path} is not inside a git repository") from None
    main = common.parent if common.name == ".git" else top
    return Repository(path=main if main.is_dir() else top, common_dir=common)


@attrs.frozen(kw_only=True)
class Scope:
    """The fleet home and the repositories one server acts on."""

    home: Path
    repositories: tuple[Repository, ...] = ()
    git: Git = attrs.field(factory=Git, eq=False, repr=False)

    @classmethod
    def build(
        cls,
        home: Path,
        repos: Iterable[str | os.PathLike[str]] = (),
        *,
        cwd: str | os.PathLike[str] | None = None,
        git: Git | None = None,
    ) -> Scope:
        """``repos`` as given, else the repository ``cwd`` is in (none when it is in none)."""
        git = git or Git()
        found: list[Repository] = []
        given = list(repos)
        for repo in given:
            found.append(find_repository(repo, git))
        if not given and cwd is not None:
            with contextlib.suppress(SettingsError):  # started outside any repository
                found.append(find_repository(cwd, git))
        unique = {r.common_dir: r for r in found}
        return cls(home=_real(home), repositories=tuple(unique.values()), git=git)

    # -- repositories -----------------------------------------------------------------------

    def describe(self) -> str:
        return ", ".join(str(r.path) for r in self.repositories) or "none"

    def repository(self, given: str | None) -> Repository:
        """The repository a tool names (or the only one there is)."""
        if not self.repositories:
            raise OutOfScope(
                "this server was given no repository: start `fleet mcp serve` with --repo PATH "
                "(or from inside one)"
            )
        if given is None or not str(given).strip():
            if len(self.repositories) == 1:
                return self.repositories[0]
            raise SettingsError(f"name the repo: one of {self.describe()}")
        try:
            repo = find_repository(given, self.git)
        except SettingsError as exc:
            raise OutOfScope(f"{exc}; this server acts on {self.describe()}") from None
        for known in self.repositories:
            if known.common_dir == repo.common_dir:
                return known
        raise OutOfScope(
            f"repository {given} is not one this server was told to use ({self.describe()})"
        )

    def owns_dir(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is a directory inside one of the repositories or their worktrees."""
        where = _real(path)
        if any(_inside(where, r.path) for r in self.repositories):
            return True
        if not where.is_dir() or not self.repositories:
            return False
        try:
            common = _real(self.git.common_dir(where))
        except GitError:
            return False
        return any(r.common_dir == common for r in self.repositories)

    # -- files and workers ------------------------------------------------------------------

    def file(self, given: str, what: str) -> Path:
        """A file a tool names: it must exist inside the fleet home or a repository."""
        if not str(given).strip():
            raise SettingsError(f"{what}: empty path")
        path = expand(given)
        if not path.is_absolute():
            if len(self.repositories) != 1:
                raise SettingsError(f"{what} {given}: give an absolute path")
            path = self.repositories[0].path / path
        real = _real(path)
        if not real.is_file():
            raise SettingsError(f"{what} {given} does not exist")
        if _inside(real, self.home) or self.owns_dir(real.parent):
            return path
        raise OutOfScope(
            f"{what} {given} is outside this server's fleet home and repositories "
            f"({self.describe()})"
        )

    def require_worker(self, worker: str, worktree: str | None, state: str) -> None:
        """Refuse to act on a worker whose worktree belongs to none of the repositories."""
        if state == "retired":
            return  # nothing left to act on; the verb says so
        if worktree and self.owns_dir(worktree):
            return
        where = f"its worktree {worktree}" if worktree else "it has no worktree"
        raise OutOfScope(
            f"worker {worker} is not in a repository this server was told to use ({where}; "
            f"this server acts on {self.describe()})"
        )


# -- keys -------------------------------------------------------------------------------------


def tool_key_source(spec: str) -> str:
    """A key source a tool may name: ``env:NAME`` or ``keyring:SERVICE/USER``."""
    source = parse_key_source(spec)
    if source.kind == "command":
        raise Refused(
            "key_from command:... is not accepted from a tool (no tool runs a shell command it "
            "was given); use env:NAME or keyring:SERVICE/USER, or start the server with "
            "--key-from"
        )
    return str(source)


def secrets(
    key_sources: Iterable[str | None], environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """The values that must never appear in a result."""
    env = os.environ if environ is None else environ
    names = set(CREDENTIAL_VARS)
    for spec in key_sources:
        if not spec:
            continue
        try:
            source = parse_key_source(spec)
        except FleetError:
            continue
        if source.kind == "env":
            names.add(source.ref)
    return frozenset(v for n in names if len(v := env.get(n, "").strip()) >= MIN_SECRET)


def redact(text: str, values: Iterable[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text
