"""check, send and retire of a remote worker run on its own host, through `fleet ship`, with
the same guards, and print what they print there; an offline host is refused at once."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import orjson
import pytest

from fleet import Fleet, FollowUpSent
from fleet._cli import main
from fleet._hub.actions import run_on_host
from tests.conftest import Repo
from tests.finish._helpers import commit, finished_worker
from tests.hub.conftest import NatsServer, ThreadShipper, eventually, strip_warning

pytestmark = pytest.mark.nats


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, strip_warning(err)


def _without_times(data: dict[str, object]) -> dict[str, object]:
    commands = [
        {k: v for k, v in c.items() if k != "seconds"}  # type: ignore[union-attr]
        for c in data.get("commands", [])  # type: ignore[union-attr]
    ]
    return {**data, "commands": commands}


@pytest.fixture
def host(nats_server: NatsServer, home: Path) -> object:
    shipper = ThreadShipper(nats_server.hub(heartbeat=0.2), home, "build1",
                            allow_commands=True).start()
    yield shipper
    shipper.stop()


def test_check_runs_on_the_workers_host_and_answers_what_it_answers_there(
    nats_server: NatsServer, host: ThreadShipper, repo: Repo, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    coordinator = str(tmp_path / "coordinator")
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w1")
    eventually(lambda: host.shipper.shipped >= 2)
    hub = ["--hub", nats_server.url]
    code, out, err = _run(capsys, "--home", coordinator, "check", "build1/w1", *hub, "--json",
                          "--cmd", "true")
    assert (code, err) == (0, "")
    remote = json.loads(out)
    code, out, _ = _run(capsys, "check", "w1", "--json", "--cmd", "true")
    assert code == 0 and _without_times(json.loads(out)) == _without_times(remote)
    assert remote["worker"] == "w1" and remote["verdict"] == "checked"
    # The verdict was journaled on the host, and shipped: the hub shows it.
    with Fleet(coordinator, hub=nats_server.url) as fleet:
        eventually(lambda: fleet.state("build1/w1").reason == "checked")
    # A failing check fails there, with the host's findings and exit code.
    (path / "notes.txt").write_text("left behind\n")
    code, out, err = _run(capsys, "--home", coordinator, "check", "w1", *hub)
    assert code == 4 and err == ""
    assert "untracked" in out and out.startswith("w1: failed")


def test_retire_runs_its_guards_on_the_workers_host(
    nats_server: NatsServer, host: ThreadShipper, repo: Repo, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    coordinator = str(tmp_path / "coordinator")
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w1")
    commit(path, "more.txt", "not pushed\n", "more")
    eventually(lambda: host.shipper.shipped >= 2)
    hub = ["--hub", nats_server.url]
    code, out, _ = _run(capsys, "--home", coordinator, "retire", "build1/w1", "--yes", *hub,
                        "--json")
    assert code == 4
    outcome = json.loads(out)["outcomes"][0]
    assert (outcome["worker"], outcome["host"], outcome["retired"]) == ("w1", "build1", False)
    assert path.is_dir()
    repo.git("-C", str(path), "push", "-q")
    code, out, _ = _run(capsys, "--home", coordinator, "retire", "build1/w1", "--yes", *hub)
    assert code == 4 and "check failed" in out  # as on the host: a failed check holds it
    assert _run(capsys, "--home", coordinator, "check", "build1/w1", *hub)[0] == 0
    code, out, err = _run(capsys, "--home", coordinator, "retire", "build1/w1", "--yes", *hub)
    assert code == 0, out + err
    assert out.startswith("w1: retired;") and not path.exists()
    with Fleet(coordinator, hub=nats_server.url) as fleet:
        eventually(lambda: fleet.state("build1/w1").state == "retired")


def test_send_delivers_a_follow_up_through_the_hosts_adapter(
    nats_server: NatsServer, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], home: Path,
) -> None:
    from tests.adapters.conftest import FAKES, make_rig

    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    rigs = make_rig("herdr", tmp_path, repo, monkeypatch)
    rig = next(rigs)
    rig.started("w1")
    shipper = ThreadShipper(nats_server.hub(heartbeat=0.2), home, "desk").start()
    eventually(lambda: shipper.shipper.shipped >= 1)
    try:
        follow = tmp_path / "follow.md"
        follow.write_text("Also update the changelog.\n")
        code, out, err = _run(capsys, "--home", str(tmp_path / "c"), "send", "desk/w1",
                              str(follow), "--hub", nats_server.url, "--json")
        assert code == 0, err
        sent = json.loads(out)
        assert sent["worker"] == "w1" and sent["adapter"] == "herdr"
        inbox = Path(sent["sent"])
        assert inbox.parent == home / "hub" / "inbox"
        assert inbox.read_text() == follow.read_text()
        assert oct(inbox.stat().st_mode & 0o777) == "0o600"
        logged = [e for e in rig.fleet.log("w1") if isinstance(e, FollowUpSent)]
        assert [e.file for e in logged] == [str(inbox)]
        # The same guards: a file that is not UTF-8 never leaves the coordinator.
        follow.write_bytes(b"\xff\n")
        code, out, err = _run(capsys, "send", "desk/w1", str(follow), "--hub", nats_server.url)
        assert (code, out) == (1, "") and "not UTF-8" in err
    finally:
        shipper.stop()
        rigs.close()


def test_an_offline_host_is_refused_at_once_and_a_host_without_actions_says_so(
    nats_server: NatsServer, repo: Repo, tmp_path: Path, home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "w1")
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "build1", actions=False).start()
    eventually(lambda: shipper.shipper.shipped >= 2)
    hub = ["--home", str(tmp_path / "c")]
    code, _, err = _run(capsys, *hub, "check", "build1/w1", "--hub", nats_server.url)
    assert code == 4 and "host build1 answers no actions" in err
    shipper.stop()
    started = time.monotonic()
    for argv in (["check", "build1/w1"], ["retire", "build1/w1", "--yes"]):
        code, out, err = _run(capsys, *hub, *argv, "--hub", nats_server.url)
        assert (code, out) == (4, "")
        assert err.startswith("fleet: host build1 is offline (its `fleet ship` stopped): ")
        assert "never from the hub's copy" in err
    assert time.monotonic() - started < 5


def test_what_a_remote_command_printed_leaves_the_host_redacted(tmp_path: Path) -> None:
    fake = tmp_path / "fake-fleet"
    fake.write_text("#!/bin/sh\necho 'token=abcdef0123456789 ghp_" + "x" * 36 + "'\n")
    fake.chmod(0o755)
    body = orjson.dumps({"verb": "check", "args": {"worker": "w1"}})
    reply = asyncio.run(run_on_host(tmp_path, "h", body, allow_commands=False,
                                    fleet_argv=[str(fake)]))
    assert reply["exit"] == 0
    assert reply["stdout"] == "token=[redacted] [redacted]\n"


def test_the_host_refuses_check_commands_unless_allowed_and_malformed_requests() -> None:
    home = Path("/nonexistent-fleet-home")

    def ask(body: object, allow: bool = False) -> dict[str, object]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        return asyncio.run(run_on_host(home, "h", data, allow_commands=allow))

    reply = ask({"verb": "check", "args": {"worker": "w1", "cmds": ["rm -rf /"]}})
    assert reply["exit"] == 4 and "--allow-commands" in str(reply["stderr"])
    for bad in (b"not json", {"verb": "exec", "args": {}},
                {"verb": "check", "args": {"worker": "../etc"}},
                {"verb": "send", "args": {"worker": "w1", "text": "x" * (300 * 1024)}},
                {"verb": "retire", "args": {"workers": ["w1"], "mode": "force"}},
                {"verb": "check", "args": {"worker": "w1", "base": "--upload-pack=evil"}}):
        reply = ask(bad)
        assert reply["exit"] == 2 and str(reply["stderr"]).startswith("fleet: "), bad
