"""Fixtures shared by the whole suite. Every test gets its own FLEET_HOME, HOME (so the settings
file, ``~/.claude`` and every XDG dir are its own) and git identity: nothing reads or writes the
real home directory. The agent CLIs stay where ``scripts/install-agents`` put them. Every test
must stop the threads and processes it starts: a test that leaves one behind fails."""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest


@pytest.fixture(autouse=True, scope="session")
def _machine_left_whole() -> Iterator[None]:
    """No test may damage the machine it runs on: a write that renamed a file over /dev/null
    (fleet given it as a path) would break every later process that opens it."""
    yield
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode), "a test replaced /dev/null"


def _loopback(host: object) -> bool:
    if host in (None, "", "localhost", b"localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True, scope="session")
def _loopback_only() -> Iterator[None]:
    """Tests reach 127.0.0.1 and nothing else: a hostile host name given to a command (a hub
    address, say) must fail here as it would on a closed network, without a DNS query or a
    connection leaving the machine. Processes a test starts are bounded by their own timeouts."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if not _loopback(host):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    def refused(address: object) -> bool:
        return isinstance(address, tuple) and not _loopback(address[0])

    def connect(self: socket.socket, address: object) -> None:
        if refused(address):
            raise ConnectionRefusedError(111, "the test suite reaches loopback only")
        real_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        if refused(address):
            return 111
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket, "getaddrinfo", getaddrinfo)
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        yield


#: Where the agent CLIs were installed, computed before any test moves HOME.
AGENTS_DIR = os.environ.get("FLEET_AGENTS_DIR") or str(
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fleet" / "agents"
)
_ISOLATED = (
    "FLEET_WORKER", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "CLAUDE_PROJECT_DIR", "FLEET_SETTINGS",
    "FLEET_PROFILES", "FLEET_CLAUDE", "FLEET_CODEX", "FLEET_WORKTREES", "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID", "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN",
)


@pytest.fixture(autouse=True)
def _hermetic_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private FLEET_HOME and HOME, and a git config that knows nothing of the machine's."""
    base = tmp_path_factory.mktemp("env")
    monkeypatch.setenv("FLEET_HOME", str(base / "fleet-home"))
    home = base / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for xdg in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(xdg, str(home / xdg.lower()))
    monkeypatch.setenv("FLEET_AGENTS_DIR", AGENTS_DIR)
    gitconfig = base / "gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Fleet Test\n\temail = fleet@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in _ISOLATED:
        monkeypatch.delenv(name, raising=False)


#: Threads other code may start once per process and keep (the interpreter's own).
_PROCESS_THREADS = ("pydevd", "asyncio_")
LEFTOVER_GRACE = 10.0


def _children() -> set[int]:
    """Live (non-zombie) processes whose parent is this one."""
    me = str(os.getpid())
    out = set()
    # os.listdir, not Path.glob: glob stats each entry, and a process that ends in between
    # makes it raise instead of skipping the entry.
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] not in ("Z", "X"):
            out.add(int(name))
    return out


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """A test stops what it starts: no new thread is still running and no child process is
    still alive when it ends (after a grace for ones already stopping)."""
    threads = set(threading.enumerate())
    children = _children()
    yield
    deadline = time.monotonic() + LEFTOVER_GRACE
    while True:
        extra_threads = [t for t in threading.enumerate()
                         if t not in threads and t.is_alive()
                         and not t.name.startswith(_PROCESS_THREADS)]
        extra_children = _children() - children
        if not extra_threads and not extra_children:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    names = [t.name for t in extra_threads]
    commands = []
    for pid in sorted(extra_children):
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                            .decode(errors="replace")[:200])
        except OSError:
            continue
    pytest.fail(f"the test left threads {names} and processes {commands} running",
                pytrace=False)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["FLEET_HOME"])


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout.strip()


@attrs.frozen
class Repo:
    """A clone with one pushed commit on main, and its local bare origin."""

    path: Path
    remote: Path

    def git(self, *args: str) -> str:
        return git(self.path, *args)


def make_repo(root: Path) -> Repo:
    remote = root / "origin.git"
    path = root / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True, capture_output=True)
    (path / "README.md").write_text("demo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "push", "-q", "-u", "origin", "main")
    return Repo(path=path, remote=remote)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    yield make_repo(tmp_path)


def git_worktree(path: Path) -> Path:
    """``path`` made the top of a git worktree (an empty repository), as `fleet register`
    requires."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """An empty git worktree to register workers in."""
    return git_worktree(tmp_path / "wt")
