"""A hub set up by `fleet hub init` lets no one in but the fleet's identities, each only on its
own subjects; fleet refuses an open server; a host acts only for the coordinators it trusts;
what a coordinator reads is attributed by the server's permissions."""

from __future__ import annotations

import asyncio
import json
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from fleet import Fleet
from fleet._hub import client as hc
from fleet._hub.actions import INBOX_KEEP, MAX_INBOX_FILES, request, run_on_host
from fleet._hub.config import HubConfig
from fleet._hub.names import journal_subject, line_header, msg_id, rpc_subject
from fleet._hub.secure import MANIFEST, inbox_prefix, init_hub
from fleet._hub.view import HubView
from tests.conftest import Repo
from tests.finish._helpers import finished_worker
from tests.hub.conftest import ROOT, NatsServer, SecureHub, ThreadShipper, eventually
from tests.hub.helpers import event_stream, write_journal

pytestmark = pytest.mark.nats


def _fleet(*argv: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_HUB")}
    return subprocess.run([sys.executable, "-m", "fleet", *argv], check=False,
                          capture_output=True, text=True,
                          env={**clean, "FLEET_HOME": str(home), **env}, cwd=ROOT, timeout=60)


class Raw:
    """A bare NATS client with one identity's seed (or none), recording the server's
    permission errors: the attacker's view of the server."""

    def __init__(self, url: str, seed: str | None) -> None:
        self.url, self.seed = url, seed
        self.errors: list[str] = []

    async def __aenter__(self) -> Any:
        async def error_cb(exc: Exception) -> None:
            self.errors.append(str(exc).lower())

        opts: dict[str, Any] = {}
        if self.seed:
            # seeds live in DIR/hosts/NAME.nk and DIR/coordinators/NAME.nk
            kind = "host" if Path(self.seed).parent.name == "hosts" else "coordinator"
            opts = {"nkeys_seed": self.seed,
                    "inbox_prefix": inbox_prefix(kind, Path(self.seed).stem)}
        self.nc = hc.NATS()
        try:
            await self.nc.connect(self.url, error_cb=error_cb, allow_reconnect=False,
                                  max_reconnect_attempts=0, **opts)
        except BaseException:
            await hc._drop_client(self.nc)  # a refused client leaves its socket open
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def refused(self, subject: str, headers: dict[str, str] | None = None) -> bool:
        """Publish to ``subject``: whether the server refused it (it says so after the fact,
        so its word is waited for a while; a publish it let through gets none)."""
        self.errors.clear()
        await self.nc.publish(subject, b'{"host": "h1", "state": "up"}', headers=headers)
        await self.nc.flush()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            if any("permissions violation" in e and subject.lower() in e for e in self.errors):
                return True
            await asyncio.sleep(0.005)
        return False


def test_hub_init_writes_seeds_0600_and_keeps_them_when_run_again(tmp_path: Path) -> None:
    out = _fleet("hub", "init", str(tmp_path / "hub"), "--host", "h1", "--coordinator", "c1",
                 "--json", home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    seed = Path(done["hosts"]["h1"])
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "hub" / "nats-server.conf").stat().st_mode) == 0o600
    secret = seed.read_text().strip()
    assert secret.startswith("SU")
    config = (tmp_path / "hub" / "nats-server.conf").read_text()
    assert secret not in config and secret not in out.stdout
    assert 'listen: "127.0.0.1:4222"' in config
    before = json.loads((tmp_path / "hub" / MANIFEST).read_text())
    out = _fleet("hub", "add-host", str(tmp_path / "hub"), "h2", home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert "added host h2" in out.stdout and secret not in out.stdout
    after = json.loads((tmp_path / "hub" / MANIFEST).read_text())
    assert after["hosts"]["h1"] == before["hosts"]["h1"]
    assert after["coordinators"] == before["coordinators"] and "h2" in after["hosts"]
    assert seed.read_text().strip() == secret
    # Bad input is one line, and nothing is written.
    out = _fleet("hub", "init", str(tmp_path / "other"), "--host", "Bad Name",
                 home=tmp_path / "home")
    assert out.returncode == 1 and out.stderr.startswith("fleet: invalid host id")
    assert not (tmp_path / "other").exists()
    out = _fleet("hub", "init", str(tmp_path / "none"), home=tmp_path / "home")
    assert out.returncode == 1 and "at least one --host or --coordinator" in out.stderr


def test_the_server_refuses_anyone_without_a_credential(secure_hub: SecureHub) -> None:
    async def anonymous() -> None:
        async with Raw(secure_hub.url, None):
            pass

    with pytest.raises(hc.nats.errors.Error, match="Authorization Violation"):
        asyncio.run(anonymous())


def test_each_identity_may_publish_only_its_own_subjects(secure_hub: SecureHub) -> None:
    h1, h2 = secure_hub.seed("host", "h1"), secure_hub.seed("host", "h2")
    c1 = secure_hub.seed("coordinator", "c1")
    line = {"Fleet-Line": line_header(0, 0, 0, 3, "0" * 16),
            "Nats-Msg-Id": msg_id("h1", "w1", 0, 0)}

    async def main() -> None:
        async with Raw(secure_hub.url, h2) as other:
            assert await other.refused(journal_subject("h1", "w1"), line)  # a forged line
            assert await other.refused("$KV.fleet-hosts.h1")  # a forged heartbeat
            assert await other.refused("$KV.fleet-seen.c1.h1.w1.4")  # a forged seen mark
            assert await other.refused(rpc_subject("h1", "c1"))  # a request
            assert await other.refused("$JS.API.STREAM.PURGE.FLEET")
            assert not await other.refused(journal_subject("h2", "w1"), line)  # its own
        async with Raw(secure_hub.url, c1) as coordinator:
            assert await coordinator.refused(journal_subject("h1", "w1"), line)
            assert await coordinator.refused("$KV.fleet-hosts.h1")
            assert await coordinator.refused("$KV.fleet-seen.c2.h1.w1.4")
            assert await coordinator.refused(rpc_subject("h1", "c2"))  # as another
            assert await coordinator.refused("$JS.API.STREAM.DELETE.FLEET")
            assert await coordinator.refused("$JS.API.STREAM.MSG.DELETE.FLEET")
            assert not await coordinator.refused("$KV.fleet-seen.c1.h1.w1.4")
        async with Raw(secure_hub.url, h1) as host:
            assert await host.refused("$KV.fleet-seen.c1.h1.w1.4")
            assert await host.refused(rpc_subject("h2", "c1"))

    asyncio.run(main())


def test_an_open_server_is_refused_in_one_line_unless_insecure(
    tmp_path: Path, secure_hub: SecureHub
) -> None:
    root = tmp_path / "open"
    root.mkdir()
    server = NatsServer(root).start()
    try:
        for argv in (["ship", "--nats", server.url, "--once", "--host", "h1"],
                     ["status", "--hub", server.url]):
            out = _fleet(*argv, home=tmp_path / "home")
            assert out.returncode == 4, out.stderr
            (line,) = out.stderr.strip().splitlines()
            assert "lets in a client with no credentials" in line
            assert "`fleet hub init`" in line and "--insecure" in line
        out = _fleet("status", "--hub", server.url, "--insecure", "--json",
                     home=tmp_path / "home")
        assert out.returncode == 0 and json.loads(out.stdout) == []
        assert out.stderr.startswith("fleet: warning: the hub at") and "insecurely" in out.stderr
        out = _fleet("ship", "--nats", server.url, "--once", "--host", "h1", "--json",
                     home=tmp_path / "home", FLEET_HUB_INSECURE="1")
        assert out.returncode == 0 and "insecurely" in out.stderr
        # A server with a login, where this identity may publish anywhere: refused too.
        login = NatsServer(tmp_path / "login", config='authorization { token: "t0ken" }')
        (tmp_path / "login").mkdir()
        login.start()
        try:
            out = _fleet("status", "--hub", login.url, "--json", home=tmp_path / "home",
                         FLEET_HUB_TOKEN="t0ken")
            assert out.returncode == 4
            assert "lets coordinator default publish outside its own subjects" in out.stderr
        finally:
            login.stop()
    finally:
        server.stop()
    # Another identity's credentials under this one's name: refused, said in one line.
    out = _fleet("status", "--hub", secure_hub.url, home=tmp_path / "home",
                 FLEET_HUB_NKEY=secure_hub.seed("coordinator", "c2"), FLEET_COORDINATOR="c1")
    assert out.returncode == 4 and "the credentials given are not c1's" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_two_hosts_and_two_coordinators_each_see_every_host(
    secure_hub: SecureHub, tmp_path: Path
) -> None:
    homes = {h: tmp_path / h for h in ("h1", "h2")}
    shippers = []
    for host, home in homes.items():
        write_journal(home, "w1", event_stream("w1", random.Random(host), 6, time.time()))
        shippers.append(ThreadShipper(secure_hub.host(host, heartbeat=0.2), home, host).start())
    try:
        for coordinator in ("c1", "c2"):
            with HubView(secure_hub.coordinator(coordinator), home=tmp_path / coordinator,
                         keep_lines=True) as view:
                eventually(lambda v=view: v.next_seqs().get("h1/w1") == (0, 6)  # type: ignore
                           and v.next_seqs().get("h2/w1") == (0, 6))
                assert {h.host: h.state for h in view.hosts()} == {"h1": "online",
                                                                   "h2": "online"}
                assert all(h.ignored == 0 and h.conflicts == 0 for h in view.hosts())
                view.record_seen(["h1/w1@5"])
    finally:
        for shipper in shippers:
            shipper.stop()


def test_a_host_acts_only_for_the_coordinators_it_trusts_and_records_who_asked(
    secure_hub: SecureHub, repo: Repo, home: Path, tmp_path: Path
) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "w1")
    host = ThreadShipper(secure_hub.host("h1", heartbeat=0.2, trust=("c1",)), home, "h1").start()
    try:
        eventually(lambda: host.shipper.shipped >= 2)
        args = {"worker": "w1", "base": None, "cmds": [], "timeout": None}
        with HubView(secure_hub.coordinator("c1"), home=tmp_path / "c1") as view:
            eventually(lambda: view.host_online("h1"))
            done = view.act("check", "h1", args, as_json=True)
        assert done.exit == 0 and done.json()["verdict"] == "checked"
        with HubView(secure_hub.coordinator("c2"), home=tmp_path / "c2") as view:
            eventually(lambda: view.host_online("h1"))
            refused = view.act("check", "h1", args, as_json=True)
            sent = view.act("send", "h1", {"worker": "w1", "text": "FORGED"}, as_json=True)
        assert refused.exit == 4 and "coordinator c2 is not one this host trusts" in (
            refused.stderr)
        assert sent.exit == 4
        assert host.shipper.refused == 2
        audit = [orjson.loads(x) for x in (home / "hub" / "actions.jsonl").read_bytes()
                 .splitlines()]
        assert [(a["by"], a["verb"], a["exit"]) for a in audit] == [("c1", "check", 0)]
        assert not list((home / "hub").glob("inbox/*"))  # the refused follow-up was not kept
        with Fleet() as fleet:
            assert [e for e in fleet.log("w1") if "FORGED" in repr(e)] == []
    finally:
        host.stop()


def test_a_request_delivered_by_a_consumer_in_another_coordinators_name_is_not_acted_on(
    secure_hub: SecureHub, home: Path, tmp_path: Path
) -> None:
    """A coordinator may make push consumers: one that delivers what it wrote itself onto
    another coordinator's request subject does not make the host act (the server delivers it
    to no one; and a host acts only on a request whose reply goes to its sender's inbox)."""
    host = ThreadShipper(secure_hub.host("h1", heartbeat=0.2, trust=("c2",)), home, "h1").start()
    try:
        eventually(lambda: host.shipper.connected)

        async def main() -> list[bytes]:
            own: list[bytes] = []
            async with Raw(secure_hub.url, secure_hub.seed("coordinator", "c1")) as raw:
                js = raw.nc.jetstream()
                body = orjson.dumps(request("retire", as_json=True, workers=[], all_done=True))
                await js.publish("$KV.fleet-seen.c1.forged", body)
                mine = f"{inbox_prefix('coordinator', 'c1')}.mine"

                async def got(msg: Any) -> None:
                    own.append(msg.data)

                await raw.nc.subscribe(mine, cb=got)
                for target in (rpc_subject("h1", "c2"), mine):
                    await js.add_consumer("KV_fleet-seen", hc.js_api.ConsumerConfig(
                        deliver_subject=target,
                        deliver_policy=hc.js_api.DeliverPolicy.ALL,
                        ack_policy=hc.js_api.AckPolicy.NONE,
                        filter_subject="$KV.fleet-seen.c1.forged"))
                # The consumers deliver: the one to its own inbox did.
                for _ in range(400):
                    if own:
                        break
                    await asyncio.sleep(0.01)
            return own

        delivered = asyncio.run(main())
        assert len(delivered) == 1 and orjson.loads(delivered[0])["verb"] == "retire"
        assert not (home / "hub" / "actions.jsonl").exists()
        assert not any(e.get("event") == "action" for e in host.events)
    finally:
        host.stop()


def test_a_host_refuses_a_request_whose_reply_is_not_its_senders_inbox(
    tmp_path: Path, home: Path
) -> None:
    from fleet._hub.ship import Shipper

    shipper = Shipper(HubConfig(url="nats://127.0.0.1:1", trust=("c2",)), home, host="h1")

    class Msg:
        def __init__(self, subject: str, reply: str) -> None:
            self.subject, self.reply = subject, reply

    ok = Msg(rpc_subject("h1", "c2"), f"{inbox_prefix('coordinator', 'c2')}.x.1")
    assert shipper._asker(ok) == ("c2", None)  # type: ignore[arg-type]
    delivered = Msg(rpc_subject("h1", "c2"), "$JS.ACK.KV_fleet-seen.x.1.1.1.1.0")
    assert shipper._asker(delivered)[1] == (  # type: ignore[arg-type]
        "a request said to be from c2 that c2 did not send")
    other = Msg(rpc_subject("h1", "c2"), f"{inbox_prefix('coordinator', 'c1')}.x.1")
    assert shipper._asker(other)[1] is not None  # type: ignore[arg-type]
    untrusted = Msg(rpc_subject("h1", "c1"), f"{inbox_prefix('coordinator', 'c1')}.x.1")
    assert "not one this host trusts" in str(shipper._asker(untrusted)[1])  # type: ignore


def test_forged_heartbeats_and_lines_that_come_again_changed_are_counted_never_used(
    nats_server: NatsServer, home: Path, tmp_path: Path
) -> None:
    """On a server that lets them through (insecure), what a host does not ship is ignored and
    counted, and a line is never replaced at its place."""
    write_journal(home, "w1", event_stream("w1", random.Random(2), 3, time.time()))
    host = ThreadShipper(nats_server.hub(heartbeat=0.2), home, "h1").start()
    try:
        with HubView(nats_server.hub(), home=tmp_path / "c", keep_lines=True) as view:
            eventually(lambda: view.next_seqs().get("h1/w1") == (0, 3))
            kept = view.lines("h1/w1")

            async def forge() -> None:
                nc = await hc.nats.connect(nats_server.url)
                js = nc.jetstream()
                await js.publish("$KV.fleet-hosts.h1", orjson.dumps(
                    {"host": "h9", "state": "up", "interval": 3600}))
                await js.publish(journal_subject("h1", "w1"), b'{"e": "forged"}', headers={
                    "Fleet-Line": line_header(0, 1, 10, 20, "ab" * 8),
                    "Nats-Msg-Id": msg_id("h1", "w1", 0, 10) + "x"})
                # Line 1 again, with other content (and an id of its own, so JetStream keeps
                # it): a conflict, and the first line stays.
                await js.publish(journal_subject("h1", "w1"), b'{"e": "forged"}', headers={
                    "Fleet-Line": line_header(0, 1, 10, 20, "ab" * 8),
                    "Nats-Msg-Id": msg_id("h1", "w1", 0, 10)})
                await nc.close()

            asyncio.run(forge())
            (h1,) = eventually(lambda: [h for h in view.hosts()
                                        if h.ignored == 2 and h.conflicts == 1])
            assert h1.first_ignored in ("a heartbeat that does not name its host",
                                        "a message on w1's subject that h1 does not ship")
            assert view.lines("h1/w1") == kept and h1.state == "online"
    finally:
        host.stop()


def test_the_inbox_keeps_no_refused_follow_up_and_is_bounded(home: Path) -> None:
    body = orjson.dumps(request("send", as_json=True, worker="nobody", text="hello"))
    reply = asyncio.run(run_on_host(home, "h1", body, allow_commands=False))
    assert reply["exit"] != 0
    inbox = home / "hub" / "inbox"
    assert list(inbox.iterdir()) == []  # refused: not kept
    for n in range(MAX_INBOX_FILES):
        (inbox / f"held-{n}.md").write_text("x")
    reply = asyncio.run(run_on_host(home, "h1", body, allow_commands=False))
    assert reply["exit"] == 2 and "inbox is full" in reply["stderr"]
    assert len(list(inbox.iterdir())) == MAX_INBOX_FILES
    old = time.time() - INBOX_KEEP - 60
    for path in inbox.iterdir():
        os.utime(path, (old, old))
    reply = asyncio.run(run_on_host(home, "h1", body, allow_commands=False))
    assert "inbox is full" not in reply["stderr"] and list(inbox.iterdir()) == []


def test_a_hub_nobody_listens_on_fails_in_one_line_within_three_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet._cli import main
    from tests.hub.conftest import free_port

    # In this process: what is timed is fleet's, not the interpreter's start.
    started = time.monotonic()
    code = main(["--home", str(tmp_path / "home"), "status", "--hub",
                 f"nats://127.0.0.1:{free_port()}"])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert (code, out) == (1, "") and len(err.strip().splitlines()) == 1
    assert "cannot reach the hub" in err and "nothing listens there" in err
    assert took < 3.0, took


def test_hub_config_is_written_with_tls_when_given(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("x")
    (tmp_path / "k.pem").write_text("x")
    done = init_hub(tmp_path / "hub", hosts=["h1"], tls_cert=str(tmp_path / "c.pem"),
                    tls_key=str(tmp_path / "k.pem"), listen="0.0.0.0:4443")
    config = done.config.read_text()
    assert "tls { cert_file:" in config and 'listen: "0.0.0.0:4443"' in config
    assert done.url == "tls://0.0.0.0:4443"
    assert HubConfig(url=done.url).servers() == ["tls://0.0.0.0:4443"]


def test_a_host_added_later_ships_after_a_reload_and_the_others_keep_theirs(
    secure_hub: SecureHub, tmp_path: Path
) -> None:
    before = secure_hub.seed("host", "h1")
    key = Path(before).read_text()
    secure_hub.add("host", "h3")  # fleet hub add-host, then the server reads its config again
    assert Path(before).read_text() == key
    home = tmp_path / "h3"
    write_journal(home, "w1", event_stream("w1", random.Random(3), 2, time.time()))

    def let_in() -> bool:
        async def main() -> None:
            async with Raw(secure_hub.url, secure_hub.seed("host", "h3")):
                pass

        try:
            asyncio.run(main())
            return True
        except (hc.nats.errors.Error, OSError):
            return False  # the server has not read its config again yet (refused, or reset)

    eventually(let_in, timeout=30, interval=0.1)
    shipper = ThreadShipper(secure_hub.host("h3", heartbeat=0.2), home, "h3").start()
    try:
        eventually(lambda: shipper.shipped() == 2)
    finally:
        shipper.stop()
    with HubView(secure_hub.coordinator("c1"), home=tmp_path / "c1") as view:
        assert "h3/w1" in view.workers()


def test_a_tls_hub_from_hub_init_ships_and_reads_with_the_servers_ca(tmp_path: Path) -> None:
    from tests.hub.conftest import free_port
    from tests.hub.test_security import _certificates

    certs = tmp_path / "certs"
    certs.mkdir()
    ca, cert, key = _certificates(certs)
    port = free_port()
    done = init_hub(tmp_path / "hub", hosts=["h1"], coordinators=["c1"],
                    listen=f"127.0.0.1:{port}", tls_cert=str(cert), tls_key=str(key),
                    store=str(tmp_path / "store"))
    assert done.url == f"tls://127.0.0.1:{port}"
    server = NatsServer(tmp_path, conf_file=done.config)
    server.port, server.scheme = port, "tls"
    server.start()
    home = tmp_path / "h1"
    write_journal(home, "w1", event_stream("w1", random.Random(8), 3, time.time()))
    seeds = done.root
    host = HubConfig(url=done.url, tls_ca=str(ca), host="h1", nkey=str(seeds / "hosts/h1.nk"),
                     heartbeat=0.2)
    shipper = ThreadShipper(host, home, "h1").start()
    try:
        coordinator = HubConfig(url=done.url, tls_ca=str(ca), coordinator="c1",
                                nkey=str(seeds / "coordinators/c1.nk"))
        with HubView(coordinator, home=tmp_path / "c1") as view:
            eventually(lambda: view.next_seqs().get("h1/w1") == (0, 3))
        out = _fleet("status", "--hub", done.url, "--json", home=tmp_path / "c2",
                     FLEET_HUB_TLS_CA=str(ca), FLEET_HUB_NKEY=str(seeds / "coordinators/c1.nk"),
                     FLEET_COORDINATOR="c1")
        assert out.returncode == 0, out.stderr
        assert [r["worker"] for r in json.loads(out.stdout)] == ["h1/w1"]
    finally:
        shipper.stop()
        server.stop()
