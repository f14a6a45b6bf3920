"""Shipping journals into a real nats-server and reading them back through the hub view:
every line once, in order, folded exactly as on its host."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from fleet._clock import MockClock
from fleet._core.events import HookEvent, encode_line
from fleet._home import journal_path
from fleet._hub.view import HubView
from fleet._journal import append
from tests.hub.conftest import NatsServer, ThreadShipper, eventually
from tests.hub.helpers import (
    Writers,
    audit_stream,
    core_fields,
    event_stream,
    journal_lines,
    local_states,
    qualified,
    write_journal,
)

pytestmark = pytest.mark.nats


def _caught_up(view: HubView, homes: dict[str, Path]) -> bool:
    seqs = view.next_seqs()
    for host, home in homes.items():
        for worker in os.listdir(home / "workers"):
            want = len(journal_lines(home, worker))
            if seqs.get(f"{host}/{worker}", (0, -1))[1] != want:
                return False
    return True


def assert_same_as_hosts(view: HubView, homes: dict[str, Path], now: float) -> None:
    """Each remote worker's lines are its journal's, and its state is its host's."""
    remote = {s.worker: s for s in view.states()}
    expected = 0
    for host, home in homes.items():
        for worker, state in local_states(home, now).items():
            expected += 1
            name = f"{host}/{worker}"
            assert view.lines(name) == journal_lines(home, worker), name
            assert core_fields(remote[name]) == core_fields(qualified(state, host)), name
    assert len(remote) == expected
    assert view.counts()["waiting"] == 0


def test_every_line_reaches_the_hub_once_and_folds_as_on_its_host(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    rng = random.Random(17)
    t0 = time.time() - 3600
    homes = {f"h{n}": tmp_path / f"h{n}" for n in range(3)}
    plans = {
        (home, f"w{k}"): event_stream(f"w{k}", rng, 80, t0)
        for home in homes.values() for k in range(3)
    }
    cfg = nats_server.hub(heartbeat=0.2)
    shippers = [ThreadShipper(cfg, home, host).start() for host, home in homes.items()]
    try:
        Writers(plans, pause=0.001).start().join()
        clock = MockClock(time.time())
        with HubView(cfg, home=tmp_path / "coord", keep_lines=True, clock=clock) as view:
            eventually(lambda: _caught_up(view, homes))
            assert_same_as_hosts(view, homes, clock.now())
            assert view.counts()["duplicates"] == 0
    finally:
        for s in shippers:
            s.stop()
    audit = audit_stream(cfg)
    assert len(audit) == 9 * 80 and set(audit.values()) == {1}


def test_a_torn_tail_waits_for_its_newline(nats_server: NatsServer, tmp_path: Path) -> None:
    home = tmp_path / "h"
    write_journal(home, "w1", event_stream("w1", random.Random(1), 5, time.time()))
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "h").start()
    try:
        with HubView(cfg, home=tmp_path / "c", keep_lines=True, use_cache=False) as view:
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 5))
            line = encode_line(HookEvent(ts=time.time(), src="claude", hook="Stop"))
            with open(journal_path(home, "w1"), "ab") as f:
                f.write(line[:10])  # a writer that has not finished its line
            time.sleep(0.6)
            assert view.next_seqs()["h/w1"] == (0, 5)
            with open(journal_path(home, "w1"), "ab") as f:
                f.write(line[10:])
            eventually(lambda: view.next_seqs()["h/w1"] == (0, 6))
            assert view.lines("h/w1") == journal_lines(home, "w1")
            assert view.state("h/w1").state == "stopped"
    finally:
        shipper.stop()


@pytest.mark.parametrize("how", ["replaced", "shortened", "rewritten"])
def test_a_journal_changed_behind_fleets_back_is_shipped_again_as_a_new_generation(
    how: str, nats_server: NatsServer, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    rng = random.Random(5)
    write_journal(home, "w1", event_stream("w1", rng, 12, time.time() - 100))
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "h").start()
    try:
        with HubView(cfg, home=tmp_path / "c", keep_lines=True, use_cache=False) as view:
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 12))
            path = journal_path(home, "w1")
            other = b"".join(
                encode_line(e) for e in event_stream("w1", random.Random(9), 12, time.time())
            )
            if how == "replaced":  # a new file renamed over the journal
                tmp = path.with_suffix(".new")
                tmp.write_bytes(other[: len(other) // 2].rsplit(b"\n", 1)[0] + b"\n")
                os.replace(tmp, path)
            elif how == "shortened":
                data = path.read_bytes()
                with open(path, "r+b") as f:
                    f.truncate(len(data.split(b"\n", 3)[0]) + 1)
            else:  # the same inode and size, other bytes
                data = path.read_bytes()
                last = data[:-1].rsplit(b"\n", 1)[1]
                with open(path, "r+b") as f:
                    f.seek(len(data) - 1 - len(last))
                    f.write(last.replace(b"claude", b"CLAUDE", 1) if b"claude" in last
                            else last[:-2] + b"x}")
            shipper.shipper._mark("w1")  # no need to wait for the sweep
            shipper.loop.call_soon_threadsafe(shipper.shipper._wake_soon)
            eventually(lambda: view.next_seqs()["h/w1"][0] == 1
                       and view.lines("h/w1") == journal_lines(home, "w1"))
            now = time.time()
            state = local_states(home, now)["w1"]
            assert core_fields(view.state("h/w1")) == core_fields(qualified(state, "h"))
            assert any(e.get("event") == f"journal-{how}" for e in shipper.events)
            # Later appends go on in the new generation.
            append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            eventually(lambda: view.lines("h/w1") == journal_lines(home, "w1"))
    finally:
        shipper.stop()
    audit = audit_stream(cfg)
    assert set(audit.values()) == {1}


def test_a_lost_cursor_file_is_rebuilt_from_the_server(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    write_journal(home, "w1", event_stream("w1", random.Random(3), 30, time.time()))
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "h").start()
    eventually(lambda: shipper.shipper.shipped == 30)
    shipper.stop()
    cursors = home / "hub" / "ship-h.json"
    assert (cursors.stat().st_mode & 0o777, cursors.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    cursors.unlink()
    write_journal(home, "w1", event_stream("w1", random.Random(4), 5, time.time()))
    again = ThreadShipper(cfg, home, "h").start()
    try:
        eventually(lambda: again.shipper.cursors.get("w1") is not None
                   and again.shipper.cursors["w1"].seq == 35)
        assert again.shipper.shipped == 5  # what the server had was not sent again
        assert again.shipper.cursors["w1"].gen == 0
    finally:
        again.stop()
    audit = audit_stream(cfg)
    assert sorted(k[3] for k in audit) == list(range(35)) and set(audit.values()) == {1}


def test_a_server_that_lost_its_store_gets_every_line_again(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    home = tmp_path / "h"
    write_journal(home, "w1", event_stream("w1", random.Random(6), 20, time.time()))
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "h").start()
    try:
        with HubView(cfg, home=tmp_path / "c", keep_lines=True, use_cache=False) as view:
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 20))
            nats_server.kill()
            shutil.rmtree(nats_server.store)  # a new, empty server at the same address
            nats_server.start()
            write_journal(home, "w1", event_stream("w1", random.Random(7), 4, time.time()))
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 24), timeout=40)
            assert view.lines("h/w1") == journal_lines(home, "w1")
            # The view either read the new stream from its start and dropped what it had, or
            # found the very message it had last read at the same sequence and went on.
            assert view.counts()["waiting"] == 0
        # The new server gets every line, the ones sent before its crash included.
        eventually(lambda: sorted(k[3] for k in audit_stream(cfg)) == list(range(24)))
    finally:
        shipper.stop()


def test_a_shipper_that_cannot_set_up_on_the_server_tries_again_instead_of_dying(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers but cannot set up the stream yet (here: JetStream not on) made
    the shipper's thread end for good, and with it every later line."""
    monkeypatch.setenv("FLEET_HUB_INSECURE", "1")
    import subprocess

    from tests.hub.conftest import wait_port

    root = tmp_path / "nats"
    root.mkdir()
    server = NatsServer(root)
    # Its port, first without -js: JetStream requests get no answer.
    plain = subprocess.Popen([server.binary, "-a", "127.0.0.1", "-p", str(server.port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_port(server.port)
    write_journal(home, "w1", event_stream("w1", random.Random(5), 3, time.time()))
    shipper = ThreadShipper(server.hub(heartbeat=0.2), home, "h").start()
    try:
        eventually(lambda: any(e.get("event") == "retry" for e in shipper.events))
        assert shipper.thread is not None and shipper.thread.is_alive()
        plain.terminate()
        plain.wait(10)
        wait_port(server.port, up=False)
        server.start()  # JetStream is there now
        eventually(lambda: shipper.shipper.shipped == 3)
    finally:
        shipper.stop()
        if plain.poll() is None:
            plain.kill()
            plain.wait(10)
        server.stop()
