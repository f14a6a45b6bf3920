"""``fleet hub init``: a nats-server configuration that lets no one in but the fleet's own
identities, each allowed only its own subjects.

One account (``FLEET``, JetStream on) holds one nkey user per host and per coordinator. The
server enforces who may publish where, and that is what attributes every message a coordinator
reads (see :func:`permissions`):

- a host publishes only its journal subjects ``fleet.<host>.*`` and its heartbeat key, and
  answers (once each) only the requests on ``fleet.rpc.<host>.*``;
- a coordinator publishes only requests named after itself, ``fleet.rpc.*.<coordinator>``, and
  its own seen marks ``$KV.fleet-seen.<coordinator>.>``;
- each subscribes only to its own inbox (and a host to its own requests), so no one reads
  another's replies;
- the JetStream API is open to each only as far as its part needs (stream info and creation
  of fleet's three streams, reading a message; for a coordinator, push consumers on them):
  no one may delete, purge or change a stream.

The directory keeps ``fleet-hub.json`` (every identity's public key: re-running init or adding
one keeps the others' keys), ``nats-server.conf``, and one seed file per identity
(``hosts/<name>.nk``, ``coordinators/<name>.nk``, mode 0600). A seed is written once and never
printed; only its file name crosses the command line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from fleet._errors import SettingsError
from fleet._files import atomic_write
from fleet._home import DIR_MODE, FILE_MODE
from fleet._hub.names import HOSTS_BUCKET, SEEN_BUCKET, STREAM, token, validate_host_id

MANIFEST: Final = "fleet-hub.json"
CONFIG: Final = "nats-server.conf"
ACCOUNT: Final = "FLEET"
DEFAULT_LISTEN: Final = "127.0.0.1:4222"
#: How long a host may take to answer one request (a check with commands may take long).
RESPONSE_WINDOW: Final = "2h"
STREAMS: Final = (STREAM, f"KV_{HOSTS_BUCKET}", f"KV_{SEEN_BUCKET}")
#: A subject no identity may publish to: the probe of ``connect`` (4 tokens, so no stream
#: captures it, and no host or coordinator id can be one of its tokens).
PROBE_SUBJECT: Final = "fleet.rpc._probe_._probe_"


def inbox_prefix(kind: str, name: str) -> str:
    """The inbox prefix of one identity: each subscribes only below its own."""
    return f"_INBOX.{'host' if kind == 'host' else 'coord'}.{token(name)}"


def _json_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def permissions(kind: str, name: str) -> dict[str, list[str]]:
    """The subjects one identity may publish to and subscribe to."""
    tok = token(name)
    api = [f"$JS.API.STREAM.INFO.{s}" for s in STREAMS]
    api += [f"$JS.API.STREAM.CREATE.{s}" for s in STREAMS]
    api.append(f"$JS.API.STREAM.MSG.GET.{STREAM}")
    if kind == "host":
        return {
            "publish": [f"fleet.{tok}.*", f"$KV.{HOSTS_BUCKET}.{tok}", *api],
            "subscribe": [f"{inbox_prefix(kind, name)}.>", f"fleet.rpc.{tok}.*"],
        }
    consumers = []
    for s in STREAMS:
        consumers += [f"$JS.API.CONSUMER.CREATE.{s}", f"$JS.API.CONSUMER.CREATE.{s}.>",
                      f"$JS.API.CONSUMER.DELETE.{s}.*"]
    return {
        "publish": [f"fleet.rpc.*.{tok}", f"$KV.{SEEN_BUCKET}.{tok}.>", *api, *consumers,
                    "$JS.FC.>"],
        "subscribe": [f"{inbox_prefix(kind, name)}.>"],
    }


@attrs.frozen(kw_only=True)
class Identity:
    kind: str  # "host" or "coordinator"
    name: str
    public: str
    seed_file: Path


@attrs.frozen(kw_only=True)
class HubDir:
    """What ``fleet hub init`` wrote (or found) in one directory."""

    root: Path
    listen: str
    tls: dict[str, str]
    hosts: tuple[Identity, ...]
    coordinators: tuple[Identity, ...]
    #: the identities this run made (the others were kept as they were)
    added: tuple[str, ...]

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def url(self) -> str:
        host, _, port = self.listen.rpartition(":")
        scheme = "tls" if self.tls else "nats"
        return f"{scheme}://{host or '127.0.0.1'}:{port}"


def _new_seed() -> tuple[str, str]:
    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    return seed.decode(), public


def _write_seed(path: Path, seed: str) -> None:
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    atomic_write(path, seed.encode() + b"\n", FILE_MODE)


def _public_of(path: Path) -> str | None:
    import nkeys

    try:
        seed = path.read_bytes().strip()
        return str(nkeys.from_seed(bytearray(seed)).public_key.decode())
    except (OSError, nkeys.NkeysError, ValueError, TypeError):
        return None


def _check_listen(listen: str) -> str:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise SettingsError(f"--listen must be HOST:PORT (e.g. {DEFAULT_LISTEN}), not {listen!r}")
    return listen


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError("not a fleet hub manifest")
    except (OSError, ValueError) as exc:
        raise SettingsError(f"{path} cannot be read ({exc}); move it away to start over") from None
    return data


def init_hub(
    root: Path,
    *,
    hosts: Sequence[str] = (),
    coordinators: Sequence[str] = (),
    listen: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_ca: str | None = None,
    store: str | None = None,
) -> HubDir:
    """Write (or extend) a hub directory: every identity named gets a seed file unless it has
    one; the others are kept as they are; the server config is written again from all of them."""
    for name in (*hosts, *coordinators):
        validate_host_id(name)
    if bool(tls_cert) != bool(tls_key):
        raise SettingsError("TLS needs both --tls-cert and --tls-key")
    for path in (tls_cert, tls_key, tls_ca):
        if path and not Path(path).is_file():
            raise SettingsError(f"TLS file {path} does not exist")
    if not str(root).isprintable():
        raise SettingsError(f"the hub directory {str(root)!r} holds a control character")
    root = root.absolute()
    root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    data = _read_manifest(root)
    chosen_listen = _check_listen(listen or str(data.get("listen") or DEFAULT_LISTEN))
    tls: dict[str, str] = dict(data.get("tls") or {})
    if tls_cert and tls_key:
        tls = {"cert": str(Path(tls_cert).absolute()), "key": str(Path(tls_key).absolute())}
        if tls_ca:
            tls["ca"] = str(Path(tls_ca).absolute())
    store_dir = str(Path(store).absolute()) if store else str(data.get("store") or root / "store")
    known: dict[str, dict[str, str]] = {
        "host": dict(data.get("hosts") or {}), "coordinator": dict(data.get("coordinators") or {})
    }
    if not (hosts or coordinators or known["host"] or known["coordinator"]):
        raise SettingsError("name at least one --host or --coordinator")
    added: list[str] = []
    for kind, names in (("host", hosts), ("coordinator", coordinators)):
        for name in names:
            seed_file = root / f"{kind}s" / f"{name}.nk"
            public = _public_of(seed_file) if seed_file.exists() else None
            if public is None:
                if seed_file.exists():
                    raise SettingsError(
                        f"{seed_file} holds no nkey seed; move it away to make a new one"
                    )
                seed, public = _new_seed()
                _write_seed(seed_file, seed)
                added.append(f"{kind} {name}")
            known[kind][name] = public
    manifest = {
        "version": 1,
        "listen": chosen_listen,
        "tls": tls,
        "store": store_dir,
        "hosts": dict(sorted(known["host"].items())),
        "coordinators": dict(sorted(known["coordinator"].items())),
    }
    atomic_write(root / MANIFEST, json.dumps(manifest, indent=2).encode() + b"\n", FILE_MODE)
    atomic_write(root / CONFIG, render_config(manifest).encode(), FILE_MODE)

    def identities(kind: str) -> tuple[Identity, ...]:
        return tuple(
            Identity(kind=kind, name=n, public=p, seed_file=root / f"{kind}s" / f"{n}.nk")
            for n, p in sorted(known[kind].items())
        )

    return HubDir(root=root, listen=chosen_listen, tls=tls, hosts=identities("host"),
                  coordinators=identities("coordinator"), added=tuple(added))


def render_config(manifest: dict[str, Any]) -> str:
    """The nats-server configuration of a manifest."""
    host, _, port = str(manifest["listen"]).rpartition(":")
    out = [
        "# Written by `fleet hub init`; run it again (or fleet hub add-host/add-coordinator)",
        "# rather than editing: every identity may publish only its own subjects.",
        f"listen: {json.dumps(f'{host}:{port}')}",
        f"jetstream {{ store_dir: {json.dumps(manifest['store'])} }}",
    ]
    tls = manifest.get("tls") or {}
    if tls:
        parts = [f"cert_file: {json.dumps(tls['cert'])}", f"key_file: {json.dumps(tls['key'])}"]
        if tls.get("ca"):
            parts.append(f"ca_file: {json.dumps(tls['ca'])}")
        out.append("tls { " + ", ".join(parts) + " }")
    users = []
    for kind, key in (("host", "hosts"), ("coordinator", "coordinators")):
        for name, public in sorted((manifest.get(key) or {}).items()):
            perms = permissions(kind, name)
            responses = (f", allow_responses: {{ max: 1, expires: {json.dumps(RESPONSE_WINDOW)} }}"
                         if kind == "host" else "")
            users.append(
                f"      # {kind} {name}\n"
                f"      {{ nkey: {json.dumps(public)}, permissions: {{\n"
                f"          publish: {{ allow: {_json_list(perms['publish'])} }},\n"
                f"          subscribe: {{ allow: {_json_list(perms['subscribe'])} }}{responses}\n"
                f"      }} }}"
            )
    out.append("accounts {")
    out.append(f"  {ACCOUNT} {{")
    out.append("    jetstream: enabled")
    out.append("    users: [\n" + ",\n".join(users) + "\n    ]")
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
