"""The hub under trouble: three simulated hosts (separate FLEET_HOMEs, each with its own
`fleet ship` process) keep journaling while the server is killed and restarted, a host is cut
off the network and brought back, and shippers crash (SIGKILL) or stop and start again, on a
server set up by `fleet hub init` (each host with its own credentials and subjects).
Afterwards the hub holds every line exactly once and every state is its host's."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._clock import MockClock
from fleet._hub.view import HubView
from tests.hub.conftest import ProcessShipper, Proxy, SecureHub, eventually
from tests.hub.helpers import (
    Writers,
    audit_stream,
    core_fields,
    event_stream,
    journal_lines,
    local_states,
    qualified,
)

pytestmark = pytest.mark.nats

HOSTS = ("h1", "h2", "h3")
WORKERS = ("w1", "w2", "w3")
LINES = 150


@pytest.fixture
def hub_server(tmp_path: Path) -> Iterator[SecureHub]:
    """The server as `fleet hub init` sets it up: every host ships with its own nkey."""
    root = tmp_path / "secure"
    root.mkdir()
    hub = SecureHub(root, HOSTS, ("c1",))
    hub.server.start()
    try:
        yield hub
    finally:
        hub.server.stop()


def test_kills_cuts_and_restarts_lose_and_double_nothing(
    hub_server: SecureHub, tmp_path: Path
) -> None:
    nats_server = hub_server.server
    rng = random.Random(20261201)
    t0 = time.time() - 7200
    homes = {host: tmp_path / host for host in HOSTS}
    plans = {
        (homes[h], w): event_stream(w, rng, LINES, t0) for h in HOSTS for w in WORKERS
    }
    proxy = Proxy(nats_server.port).start()  # h3 reaches the server only through it
    urls = {"h1": nats_server.url, "h2": nats_server.url, "h3": proxy.url}
    shippers = {h: ProcessShipper(urls[h], homes[h], h, "--nkey", hub_server.seed("host", h))
                for h in HOSTS}
    cfg = hub_server.coordinator("c1", heartbeat=0.3, offline_after=1.0)
    for home in homes.values():
        (home / "workers").mkdir(parents=True)
    for s in shippers.values():
        s.start()
    writers = Writers(plans, pause=0.03).start()  # about 5 s of journaling
    seen_offline = False
    try:
        with HubView(cfg, home=tmp_path / "coordinator", keep_lines=True) as view:
            time.sleep(1.0)
            nats_server.kill()  # the server crashes mid-stream...
            assert writers.written < len(plans) * LINES / 2  # while the hosts journal on
            time.sleep(0.8)
            nats_server.start()  # ...and comes back on the same store
            time.sleep(0.8)
            shippers["h1"].kill()  # a shipper crashes...
            time.sleep(0.4)
            shippers["h1"].start()  # ...and starts again from its cursor
            # h3 is cut off once the hub has its workers (a loaded machine may take a while
            # to start it): only then can they show offline.
            eventually(lambda: any(s.host == "h3" for s in view.states()), 60)
            proxy.cut()
            time.sleep(0.5)
            assert shippers["h2"].stop() == 0  # a clean stop and start
            shippers["h2"].start()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not seen_offline:
                seen_offline = any(
                    s.host == "h3" and s.state == "offline" for s in view.states()
                )
                time.sleep(0.05)
            proxy.restore()  # h3 is back
            writers.join()

            def all_there() -> bool:
                seqs = view.next_seqs()
                return all(
                    seqs.get(f"{h}/{w}", (0, -1))[1] == LINES for h in HOSTS for w in WORKERS
                )

            try:
                eventually(all_there, timeout=90)
            except AssertionError:
                raise AssertionError(f"not every line arrived: {view.counts()} "
                                     f"{sorted(view.next_seqs().items())}") from None
            eventually(lambda: all(s.host_state == "online" for s in view.states()), 10)
            live = view.counts()
            # 0 lost, 0 doubled: each worker's lines in the hub are its journal's, in order.
            for h in HOSTS:
                for w in WORKERS:
                    assert view.lines(f"{h}/{w}") == journal_lines(homes[h], w), (h, w)
        # The states are the hosts' own, from a cold read of the hub and from warm ones.
        clock = MockClock(time.time())
        for use_cache in (False, True, True):
            with HubView(cfg, home=tmp_path / "coordinator", clock=clock,
                         use_cache=use_cache) as view:
                remote = {s.worker: s for s in view.states()}
                assert len(remote) == len(HOSTS) * len(WORKERS)
                for h in HOSTS:
                    for w, state in local_states(homes[h], clock.now()).items():
                        got = remote[f"{h}/{w}"]
                        assert core_fields(got) == core_fields(qualified(state, h)), (h, w)
    finally:
        for s in shippers.values():
            s.stop()
        proxy.close()
    print(f"reader: {live}")
    assert seen_offline, "h3's workers never showed offline while it was cut off"
    assert live["waiting"] == 0 and live["replaced"] == 0
    assert live["foreign"] == 0 and live["conflicts"] == 0
    audit = audit_stream(cfg)
    doubled = {k: n for k, n in audit.items() if n != 1}
    assert len(audit) == len(HOSTS) * len(WORKERS) * LINES
    print(f"stream: {len(audit)} lines, {len(doubled)} stored more than once")
    assert not doubled, f"JetStream stored {len(doubled)} lines more than once"
