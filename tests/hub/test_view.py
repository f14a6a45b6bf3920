"""The coordinator's side: host-offline, waking, seen marks kept in the hub, ids."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._core.events import HookEvent, Seen
from fleet._errors import InvalidWorkerId, UnknownWorker
from fleet._hub.remote import RemoteState
from fleet._hub.view import HubView
from fleet._journal import append
from tests.hub.conftest import NatsServer, ThreadShipper, eventually
from tests.hub.helpers import event_stream, write_journal

pytestmark = pytest.mark.nats


def _home_with(tmp_path: Path, name: str, *workers: str) -> Path:
    home = tmp_path / name
    for worker in workers:
        write_journal(home, worker, event_stream(worker, random.Random(worker), 3, time.time()))
        append(home, worker, HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
    return home


def test_a_host_that_stops_shipping_shows_offline_distinct_from_gone_until_it_is_back(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    home = _home_with(tmp_path, "laptop", "w1")
    cfg = nats_server.hub(heartbeat=0.2, offline_after=0.6)
    shipper = ThreadShipper(cfg, home, "laptop").start()
    with HubView(cfg, home=tmp_path / "c", use_cache=False) as view:
        eventually(lambda: view.states() and view.states()[0].state == "working"
                   and view.states()[0].host_state == "online")
        state = view.state("laptop/w1")
        assert (state.host_state, state.needs_attention) == ("online", False)
        # A heartbeat that stops (the host froze, the network went): offline once the bound
        # passes, and `wait` wakes for it without any new message.
        shipper.loop.call_soon_threadsafe(lambda: time.sleep(1.5))
        started = time.monotonic()
        result = view.wait(timeout=5)
        assert time.monotonic() - started < 1.6
        assert [s.worker for s in result.attention] == ["laptop/w1"]
        offline = result.attention[0]
        assert isinstance(offline, RemoteState)
        assert (offline.state, offline.reason, offline.host_state) == (
            "offline", "no_heartbeat", "offline")
        assert offline.state != "gone"
        assert offline.mark == f"laptop/w1@{offline.seq}o"
        assert (offline.known_state, offline.known_mark) == ("working", state.mark)
        # Back: the fold's own state again, with nothing to attend to.
        eventually(lambda: view.state("laptop/w1").state == "working")
        # A clean stop says so at once.
        shipper.stop()
        eventually(lambda: view.state("laptop/w1").reason == "ship_stopped", timeout=5)
        assert view.hosts()[0].state == "offline"
        shipper = ThreadShipper(cfg, home, "laptop").start()
        eventually(lambda: view.state("laptop/w1").state == "working", timeout=5)
    shipper.stop()


def test_a_retired_worker_stays_retired_when_its_host_is_offline(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    from fleet._core.events import Retired

    home = _home_with(tmp_path, "h", "old", "new")
    append(home, "old", Retired(ts=time.time(), ref="refs/fleet/old/1"))
    cfg = nats_server.hub(heartbeat=0.2, offline_after=0.6)
    shipper = ThreadShipper(cfg, home, "h").start()
    eventually(lambda: shipper.shipper.shipped == 9)
    shipper.stop()
    with HubView(cfg, home=tmp_path / "c", use_cache=False) as view:
        states = {s.worker: s.state for s in view.states()}
    assert states == {"h/new": "offline", "h/old": "retired"}


def test_seen_marks_live_in_the_hub_so_a_coordinator_that_moves_is_not_woken_twice(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    home = _home_with(tmp_path, "h1", "w1")
    append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="Stop",
                                 data={"last_assistant_message": "FLEET_WORKER_DONE: ok"}))
    cfg = nats_server.hub(heartbeat=0.2, coordinator="lead")
    shipper = ThreadShipper(cfg, home, "h1").start()
    try:
        eventually(lambda: shipper.shipper.shipped == 5)
        with Fleet(tmp_path / "machine-a", hub=cfg) as fleet:
            first = fleet.wait(timeout=5)
            assert first.marks == ("h1/w1@4",)
            # Handled, and passed back as `fleet wait --seen` does: kept in the hub.
            assert fleet.wait(seen=first.marks, timeout=0.2).timed_out
        # The same coordinator on another machine, with nothing of its own: not woken again.
        with Fleet(tmp_path / "machine-b", hub=cfg) as fleet:
            assert fleet.wait(timeout=0.3).timed_out
            assert fleet.state("h1/w1").seen
        # Another coordinator has its own marks.
        other = nats_server.hub(coordinator="reviewer")
        with Fleet(tmp_path / "machine-c", hub=other) as fleet:
            assert fleet.wait(timeout=5).marks == ("h1/w1@4",)
            fleet.seen("h1/w1@4")
            assert fleet.poll().attention == ()
        # A mark the host journaled itself (`fleet seen` there) counts too.
        append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="Stop"))
        append(home, "w1", Seen(ts=time.time(), mark="w1@6"))
        with Fleet(tmp_path / "machine-d", hub=cfg) as fleet:
            eventually(lambda: fleet.state("h1/w1").events == 8)
            assert fleet.state("h1/w1").seq == 6
            assert fleet.state("h1/w1").seen and fleet.poll().attention == ()
    finally:
        shipper.stop()


def test_wait_wakes_within_milliseconds_of_a_line_on_another_host(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    home = _home_with(tmp_path, "h1", "w1")
    cfg = nats_server.hub(heartbeat=0.5)
    shipper = ThreadShipper(cfg, home, "h1").start()
    try:
        with Fleet(tmp_path / "c", hub=cfg) as fleet:
            eventually(lambda: "h1/w1" in fleet.workers()
                       and fleet.state("h1/w1").state == "working")
            woke: list[float] = []

            def waiter() -> None:
                fleet.wait(timeout=10)
                woke.append(time.perf_counter())

            thread = threading.Thread(target=waiter)
            thread.start()
            time.sleep(0.2)
            sent = time.perf_counter()
            append(home, "w1", HookEvent(ts=time.time(), src="claude", hook="Stop"))
            thread.join(10)
            assert woke and woke[0] - sent < 1.0
            assert fleet.poll().attention[0].state == "stopped"
    finally:
        shipper.stop()


def test_ids_are_host_qualified_and_a_bare_id_one_host_has_is_accepted(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    a = _home_with(tmp_path, "a", "api", "docs")
    b = _home_with(tmp_path, "b", "api")
    cfg = nats_server.hub(heartbeat=0.3)
    shippers = [ThreadShipper(cfg, a, "alpha").start(), ThreadShipper(cfg, b, "beta").start()]
    try:
        with HubView(cfg, home=tmp_path / "c", use_cache=False) as view:
            eventually(lambda: len(view.workers()) == 3)
            assert view.workers() == ["alpha/api", "alpha/docs", "beta/api"]
            assert view.resolve("docs") == "alpha/docs"
            assert view.state("beta/api").mark.startswith("beta/api@")
            with pytest.raises(UnknownWorker, match=r"on 2 hosts: name one of alpha/api, "):
                view.resolve("api")
            with pytest.raises(UnknownWorker):
                view.resolve("gamma/api")
            with pytest.raises(InvalidWorkerId):
                view.resolve("alpha/../etc")
            assert view.resolve_mark("docs@3") == "alpha/docs@3"
            assert view.resolve_mark("alpha/docs@3q") == "alpha/docs@3q"
    finally:
        for s in shippers:
            s.stop()
