"""The command line over the hub: `fleet ship`, and --hub on status, wait, watch, log, seen,
report and hosts."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet._cli import main
from fleet._core.events import HookEvent
from fleet._journal import append
from tests.hub.conftest import (
    ROOT,
    NatsServer,
    ProcessShipper,
    ThreadShipper,
    eventually,
    strip_warning,
)
from tests.hub.helpers import event_stream, journal_lines, write_journal

pytestmark = pytest.mark.nats


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, strip_warning(err)


def _fleet(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fleet", *argv], check=False, capture_output=True,
                          text=True, env={**os.environ, "FLEET_HOME": str(home)}, cwd=ROOT,
                          timeout=60)


@pytest.fixture
def shipped(nats_server: NatsServer, home: Path) -> ThreadShipper:
    write_journal(home, "w1", event_stream("w1", random.Random(1), 4, time.time()))
    append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="Stop",
                                 data={"last_assistant_message": "FLEET_WORKER_DONE: ok"}))
    shipper = ThreadShipper(nats_server.hub(heartbeat=0.2), home, "box").start()
    eventually(lambda: shipper.shipped() == 5)
    yield shipper
    shipper.stop()


def test_status_wait_seen_log_hosts_and_report_over_the_hub(
    nats_server: NatsServer, shipped: ThreadShipper, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = ["--home", str(tmp_path / "coordinator")]
    hub = ["--hub", nats_server.url]
    code, out, _ = _run(capsys, *c, "status", *hub, "--json")
    (row,) = json.loads(out)
    assert code == 0
    assert (row["worker"], row["state"], row["mark"], row["host"], row["host_state"]) == (
        "box/w1", "done", "box/w1@4", "box", "online")
    code, out, _ = _run(capsys, *c, "status", *hub)
    assert "! box/w1" in out and out.rstrip().endswith("1 worker on 1 host, 1 needs attention")
    code, out, _ = _run(capsys, *c, "wait", *hub, "--timeout", "5", "--json")
    woke = json.loads(out)
    assert code == 0 and woke["seen_hint"] == ["box/w1@4"]
    assert (woke["attention"][0]["host"], woke["attention"][0]["known_state"]) == ("box", "done")
    code, out, _ = _run(capsys, *c, "wait", "w1", *hub, "--timeout", "0.3", "--seen", "box/w1@4")
    assert code == 3 and out.startswith("timeout")
    # Kept in the hub: another process of the same coordinator is not woken.
    code, out, _ = _run(capsys, "--home", str(tmp_path / "elsewhere"), "wait", *hub,
                        "--timeout", "0.3", "--json")
    assert code == 3 and json.loads(out)["result"] == "timeout"
    code, out, _ = _run(capsys, *c, "wait", *hub, "--coordinator", "other", "--timeout", "5")
    assert code == 0 and "when handled, pass: --seen box/w1@4" in out
    assert _run(capsys, *c, "seen", "box/w1@4", *hub, "--coordinator", "other")[0] == 0
    code, out, _ = _run(capsys, *c, "log", "box/w1", *hub, "--json")
    assert [e["seq"] for e in json.loads(out)] == [0, 1, 2, 3, 4]
    code, out, _ = _run(capsys, *c, "hosts", *hub, "--json")
    (host,) = json.loads(out)
    assert (host["host"], host["state"], host["workers"]) == ("box", "online", 1)
    code, out, _ = _run(capsys, *c, "report", *hub, "--json")
    (line,) = json.loads(out)
    assert (line["worker"], line["verdict"], line["outcome"]) == ("box/w1", "claimed", "kept")
    code, out, _ = _run(capsys, *c, "watch", *hub, "--json", "--timeout", "0.3")
    assert json.loads(out.splitlines()[0])["worker"] == "box/w1"


def test_a_worker_id_with_a_host_needs_a_hub_and_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], nats_server: NatsServer
) -> None:
    code, out, err = _run(capsys, "status", "box/w1")
    assert (code, out) == (1, "")
    assert err == ("fleet: no hub named: pass --hub URL, set FLEET_HUB, or "
                   "`fleet settings set hub.url URL`\n")
    code, _, err = _run(capsys, "wait", "--hub", nats_server.url, "--seen", "box@x")
    assert code == 1 and err.startswith("fleet: invalid seen mark 'box@x'")
    code, _, err = _run(capsys, "status", "nope/w1", "--hub", nats_server.url)
    assert code == 1 and err.startswith("fleet: no worker 'nope/w1' in the hub")
    code, _, err = _run(capsys, "ship", "--once")
    assert code == 1 and "no hub named" in err


def test_fleet_ship_stops_at_once_on_a_hub_name_that_does_not_resolve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Not --once: a daemon that retried a typing slip for ever would hide it.
    code, _, err = _run(capsys, "ship", "--nats", "nowhere.invalid")
    assert code == 1 and "name resolves" in err and len(err.strip().splitlines()) == 1


def test_fleet_ship_once_and_a_host_that_cannot_reach_the_hub_keeps_journaling(
    tmp_path: Path, home: Path
) -> None:
    root = tmp_path / "nats"
    root.mkdir()
    server = NatsServer(root)  # not started yet: the hub is out of reach
    write_journal(home, "w1", event_stream("w1", random.Random(3), 3, time.time()))
    shipper = ProcessShipper(server.url, home, "late", "--insecure").start()
    try:
        # Out of reach for real: the shipper said so before the server is there.
        eventually(lambda: '"event":"unreachable"' in shipper.log.read_text(), timeout=60)
        write_journal(home, "w1", event_stream("w1", random.Random(4), 3, time.time()))
        assert shipper.proc is not None and shipper.proc.poll() is None  # still trying
        server.start()
        done = _fleet("ship", "--nats", server.url, "--host", "other", "--once", "--json",
                      "--insecure", home=tmp_path / "empty")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1])["event"] == "stopped"
        from fleet._hub.view import HubView

        with HubView(server.hub(), home=tmp_path / "c", keep_lines=True) as view:
            eventually(lambda: view.next_seqs().get("late/w1") == (0, 6), timeout=30)
            assert view.lines("late/w1") == journal_lines(home, "w1")
        assert shipper.stop() == 0
        log = shipper.log.read_text()
        assert '"event":"unreachable"' in log and '"event":"connected"' in log
    finally:
        shipper.stop()
        server.stop()


def test_a_second_shipper_of_the_same_home_and_host_is_refused(
    nats_server: NatsServer, home: Path
) -> None:
    first = ProcessShipper(nats_server.url, home, "one").start()
    try:
        eventually(lambda: (home / "hub" / "ship-one.lock").exists()
                   and (home / "hub" / "ship-one.lock").read_text().strip().isdigit())
        again = _fleet("ship", "--nats", nats_server.url, "--host", "one", home=home)
        assert again.returncode == 4
        assert strip_warning(again.stderr).startswith(
            "fleet: another `fleet ship` already ships this home")
    finally:
        first.stop()


def test_import_fleet_never_imports_the_nats_client() -> None:
    code = ("import sys, fleet\n"
            "from fleet._cli import main\n"
            "main(['status', '--json'])\n"
            "bad = [m for m in sys.modules if m == 'nats' or m.startswith('nats.')]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
