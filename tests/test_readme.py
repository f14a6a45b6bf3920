"""The README's shell blocks run as written, in order, in a temporary home.

Each ```sh block runs in bash with ``set -eu``, in the directory the block before it ended in
(the first one starts beside ``myrepo``, a git repository whose ``origin`` is a local bare
repository). The line before a block may be an HTML comment the test honours:

- ``<!-- readme-test: skip: WHY -->``: not run (the why is required: installing, a server,
  the network, minutes of benchmarks).
- ``<!-- readme-test: session WORKER -->``: first a simulated Claude Code session plays in
  WORKER's worktree through the hook the README installed (it writes a test, commits, pushes
  and ends its turn with ``FLEET_WORKER_DONE``), as a person's real session would.
- ``<!-- readme-test: fake-account -->``: the block needs an account: it runs with fake
  ``claude``/``codex`` CLIs on PATH that finish each run with ``FLEET_WORKER_DONE`` (the last
  run keeps working for a minute), and a fake ``GLM_KEY``. No clausona is on PATH.

fleet is installed first the way the README's first command installs it (``pipx install .``):
a virtual environment of its own holding fleet built from this checkout (not an editable
install), whose ``fleet`` and ``fleet-profile-run`` alone are put first on PATH; the test's own
environment only lends it the dependencies (no network here). So the blocks run against an
installed fleet, and the hooks they install name that installation's launcher. The second
command (``./scripts/test``) is what CI runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from tests.headless.conftest import FakeAgent, _stop_everything

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
KNOWN = ("skip:", "session ", "fake-account")


def blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line, code, marker) of every ```sh block, in order."""
    out: list[tuple[int, str, str | None]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            before = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
            found = MARKER.search(before)
            out.append((start + 1, "\n".join(lines[start + 1:j]) + "\n",
                        found.group(1) if found else None))
            i = j
        i += 1
    return out


def test_blocks_and_markers_are_found() -> None:
    found = blocks(README.read_text())
    assert README.read_text().splitlines()[found[0][0] - 1] == "```sh" and found[0][0] < 10, (
        "the fresh-machine commands are the README's first block, near its top")
    assert "fleet demo" in found[0][1] and "./scripts/test" in found[0][1]
    for line, _, marker in found:
        assert marker is None or marker.startswith(KNOWN), f"line {line}: unknown {marker!r}"
        assert marker != "skip:", f"line {line}: a skip says why"
    run = [b for b in found[1:] if b[2] is None or not b[2].startswith("skip:")]
    assert len(run) >= 4
    assert any(m == "fake-account" for _, _, m in found)
    assert any(m and m.startswith("session ") for _, _, m in found)


def _install_like_pipx(tmp_path: Path) -> Path:
    """fleet installed as `pipx install .` does: its own venv, its commands alone on PATH."""
    import sysconfig

    venv = tmp_path / "pipx" / "venvs" / "fleet-agents"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()
    # The dependencies come from this environment (a .pth line adds a directory, not the
    # editable fleet its own .pth files point at).
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    exposed = tmp_path / "pipx" / "bin"
    exposed.mkdir()
    for name in ("fleet", "fleet-profile-run"):
        (exposed / name).symlink_to(venv / "bin" / name)
    return exposed


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _world(tmp_path: Path, fleet_bin: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    # The config dirs Claude Code and Codex make the first time they run (the README's
    # reader has run them): `fleet hooks install` refuses one that does not exist.
    (home / ".claude").mkdir()
    (home / ".codex").mkdir()
    # The reader installed Claude Code (never logged in here): it tells its release, and runs
    # nothing else. The fake-account block puts its own agents first on PATH.
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "claude").write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "2.1.332 (Claude Code)"; exit 0; }\n'
        'echo "Not logged in" >&2\nexit 1\n')
    (agents / "claude").chmod(0o755)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Reader\n\temail = reader@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    env = {
        "HOME": str(home),
        "FLEET_HOME": str(tmp_path / "fleet-home"),
        # The installed fleet first; this environment's bin after it only for the brief's
        # check command (`pytest -q`), as the reader's project environment would give it.
        "PATH": os.pathsep.join([str(fleet_bin), str(tmp_path / "agents"),
                                 str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin",
                                 "/bin"]),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        # No Codex binary: the reader uses Claude Code only.
        "FLEET_CODEX": "none",
    }
    _git(work, "init", "-q", "--bare", "remote.git")
    repo = work / "myrepo"
    repo.mkdir()
    genv = {**os.environ, **env}
    for args in (
        ["init", "-q", "-b", "main"],
        ["remote", "add", "origin", str(work / "remote.git")],
    ):
        subprocess.run(["git", *args], cwd=repo, env=genv, check=True, timeout=60)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (repo / "paths.py").write_text("ROOT = '/home/me/project'\n")
    for args in (["add", "."], ["commit", "-q", "-m", "init"], ["push", "-q", "origin", "main"]):
        subprocess.run(["git", *args], cwd=repo, env=genv, check=True, timeout=60,
                       capture_output=True)
    return work, env


def _hook_command(home: Path) -> str:
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command: str = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    return command


def _session(worktree: Path, env: dict[str, str]) -> None:
    """A Claude Code session in ``worktree`` as its hooks see it: it writes a test, commits,
    pushes and claims it is done."""
    command = _hook_command(Path(env["HOME"]))
    session = str(uuid.uuid4())
    full = {**os.environ, **env, "CLAUDE_PROJECT_DIR": str(worktree)}

    def fire(event: str, **fields: object) -> None:
        payload = {"session_id": session, "transcript_path": str(worktree / "t.jsonl"),
                   "cwd": str(worktree), "hook_event_name": event, **fields}
        done = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(),
                              check=False, cwd=worktree, env=full, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr

    fire("SessionStart", source="startup", model="claude-sonnet-4-5")
    fire("UserPromptSubmit", prompt="Make the paths relative, with a test.")
    (worktree / "paths.py").write_text("ROOT = '.'\n")
    (worktree / "test_paths.py").write_text(
        "from paths import ROOT\n\n\ndef test_relative() -> None:\n"
        "    assert not ROOT.startswith('/')\n"
    )
    for args in (["add", "."], ["commit", "-q", "-m", "Relative paths"],
                 ["push", "-q", "-u", "origin", "HEAD"]):
        subprocess.run(["git", *args], cwd=worktree, env=full, check=True, timeout=60,
                       capture_output=True)
    fire("Stop", stop_hook_active=False, background_tasks=[],
         last_assistant_message="Paths are relative.\n\nFLEET_WORKER_DONE: paths are relative")


def _fake_account(env: dict[str, str], agent: FakeAgent) -> dict[str, str]:
    # Runs 1-4 (fix-2, docs, paths, the follow-up) finish at once; the hand-over's run (5)
    # is still at work when `fleet stop` comes.
    done = {"result": "Done.\n\nFLEET_WORKER_DONE: done"}
    agent.plan([done, done, done, done, {**done, "sleep": 60}])
    return {
        **env,
        "PATH": f"{agent.bin}{os.pathsep}{env['PATH']}",
        "FAKE_AGENT_DIR": str(agent.dir),
        "GLM_KEY": "sk-fake-glm-0123456789abcdef",
    }


def test_every_shell_block_runs_as_written(tmp_path: Path) -> None:
    fleet_bin = _install_like_pipx(tmp_path)
    work, env = _world(tmp_path, fleet_bin)
    where = tmp_path / "cwd"
    where.write_text(str(work))
    (tmp_path / "fakes").mkdir()
    agent = FakeAgent(tmp_path / "fakes")
    ran = 0
    try:
        for line, code, marker in blocks(README.read_text())[1:]:
            if marker and marker.startswith("skip:"):
                continue
            block_env = env
            if marker and marker.startswith("session "):
                worker = marker.split(None, 1)[1]
                _session(work / worker, env)
            elif marker == "fake-account":
                block_env = _fake_account(env, agent)
            script = f'set -eu\ncd "$(cat "{where}")"\n{code}pwd > "{where}"\n'
            done = subprocess.run(
                ["bash", "-c", script], check=False, env=block_env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=240,
            )
            assert done.returncode == 0, (
                f"README line {line}: exit {done.returncode}\n--- block\n{code}"
                f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
            )
            ran += 1
    finally:
        _stop_everything(Path(env["FLEET_HOME"]), agent)
        shutil.rmtree(work, ignore_errors=True)
    assert ran >= 4
    # The hooks the README installed run the installed fleet, through its launcher.
    launcher = (Path(env["FLEET_HOME"]) / "bin" / "fleet-hook").read_text()
    assert f"py={fleet_bin.parent / 'venvs' / 'fleet-agents' / 'bin' / 'python'}" in launcher
    assert "/bin/sh " in _hook_command(Path(env["HOME"]))
