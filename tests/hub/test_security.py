"""The hub connection takes credentials (user and password, token, nkey) and TLS; nothing
secret is shipped: only journal lines, with credential shapes redacted."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import attrs
import nkeys
import pytest

from fleet._core.events import HookEvent
from fleet._hub.client import HubUnreachable
from fleet._hub.config import HubConfig, resolve_hub
from fleet._hub.view import HubView
from fleet._journal import append
from tests.hub.conftest import NatsServer, ThreadShipper, eventually
from tests.hub.helpers import audit_stream, event_stream, journal_lines, write_journal

pytestmark = pytest.mark.nats


def _server(tmp_path: Path, config: str, scheme: str = "nats") -> NatsServer:
    root = tmp_path / "nats"
    root.mkdir(exist_ok=True)
    server = NatsServer(root, config=config)
    server.scheme = scheme
    return server.start()


def _ships_and_reads(server: NatsServer, tmp_path: Path, cfg: HubConfig) -> None:
    # These servers check the login and nothing else (every user may publish anywhere), so
    # fleet uses them only insecurely: what is tested here is each way of logging in.
    cfg = attrs.evolve(cfg, insecure=True)
    home = tmp_path / "host"
    write_journal(home, "w1", event_stream("w1", random.Random(2), 6, time.time()))
    shipper = ThreadShipper(cfg, home, "h").start()
    try:
        with HubView(cfg, home=tmp_path / "c", keep_lines=True, use_cache=False) as view:
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 6))
            assert view.lines("h/w1") == journal_lines(home, "w1")
    finally:
        shipper.stop()


def test_user_and_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    users = 'authorization { users = [ {user: "ship", password: "s3cret-pw"} ] }'
    server = _server(tmp_path, users)
    try:
        monkeypatch.setenv("HUB_PW", "s3cret-pw")
        cfg = resolve_hub(server.url, user="ship", password_from="env:HUB_PW", heartbeat=0.2)
        assert "s3cret-pw" not in repr(cfg) and cfg.password == "s3cret-pw"
        _ships_and_reads(server, tmp_path, cfg)
        wrong = HubConfig(url=server.url, user="ship", password="nope")
        with pytest.raises(HubUnreachable, match=r"cannot reach the hub at nats://127\.0\.0\.1:.*Authorization"):
            HubView(wrong, home=tmp_path / "c2", open_timeout=1).open()
    finally:
        server.stop()


def test_a_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server(tmp_path, 'authorization { token: "t0ken-for-the-hub" }')
    try:
        monkeypatch.setenv("FLEET_HUB_TOKEN", "t0ken-for-the-hub")
        cfg = resolve_hub(server.url, heartbeat=0.2)
        _ships_and_reads(server, tmp_path, cfg)
        with pytest.raises(HubUnreachable):
            HubView(HubConfig(url=server.url), home=tmp_path / "c2", open_timeout=1).open()
    finally:
        server.stop()


def test_an_nkey(tmp_path: Path) -> None:
    seed = nkeys.encode_seed(bytes(random.Random(9).randrange(256) for _ in range(32)),
                             nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "host.nk"
    seed_file.write_bytes(seed + b"\n")
    seed_file.chmod(0o600)
    server = _server(tmp_path, f'authorization {{ users = [ {{nkey: "{public}"}} ] }}')
    try:
        _ships_and_reads(server, tmp_path, HubConfig(url=server.url, nkey=str(seed_file),
                                                     heartbeat=0.2))
        with pytest.raises(HubUnreachable):
            HubView(HubConfig(url=server.url), home=tmp_path / "c2", open_timeout=1).open()
    finally:
        server.stop()


def _certificates(root: Path) -> tuple[Path, Path, Path]:
    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=fleet test CA")
    ssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (root / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return root / "ca.pem", root / "server.pem", root / "server.key"


def test_tls_with_the_servers_ca(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    ca, cert, key = _certificates(certs)
    server = _server(tmp_path, f'tls {{ cert_file: "{cert}"\n key_file: "{key}" }}', "tls")
    try:
        _ships_and_reads(server, tmp_path, HubConfig(url=server.url, tls_ca=str(ca),
                                                     heartbeat=0.2))
        # A server the client cannot verify is refused, clearly.
        with pytest.raises(HubUnreachable, match="cannot reach the hub"):
            HubView(HubConfig(url=server.url), home=tmp_path / "c2", open_timeout=1).open()
    finally:
        server.stop()


def test_only_journal_lines_leave_the_host_and_credentials_in_them_are_redacted(
    nats_server: NatsServer, tmp_path: Path, home: Path
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 8
    append(home, "w1", HookEvent(
        ts=time.time(), src="claude", hook="Stop",
        data={"last_assistant_message": f"I used the key {key} as told.\nFLEET_WORKER_DONE: ok"},
    ))
    # Files beside the journals that must never be shipped.
    (home / "workers" / "w1" / "env").write_text(f"ANTHROPIC_API_KEY={key}\n")
    (home / "hook-errors.log").write_text(f"failed with {key}\n")
    cfg = nats_server.hub(heartbeat=0.2)
    shipper = ThreadShipper(cfg, home, "h").start()
    try:
        with HubView(cfg, home=tmp_path / "c", keep_lines=True, use_cache=False) as view:
            eventually(lambda: view.next_seqs().get("h/w1") == (0, 1))
            (line,) = view.lines("h/w1")
            state = view.state("h/w1")
    finally:
        shipper.stop()
    assert key.encode() not in line and b"[redacted]" in line
    assert state.state == "done" and state.message is not None and key not in state.message
    assert key.encode() in journal_lines(home, "w1")[0]  # the host's journal is left as it is
    assert set(audit_stream(cfg)) == {("h", "w1", 0, 0)}
