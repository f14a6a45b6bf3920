"""How to reach the hub: the server, the credentials, TLS, and who this is.

Each value comes from, in order: the command line (or the Python argument), the environment
(``FLEET_HUB``, ``FLEET_HUB_USER``, ``FLEET_HUB_PASSWORD``, ``FLEET_HUB_TOKEN``,
``FLEET_HUB_NKEY``, ``FLEET_HUB_CREDS``, ``FLEET_HUB_TLS_CA``, ``FLEET_HUB_TLS_CERT``,
``FLEET_HUB_TLS_KEY``, ``FLEET_HOST``, ``FLEET_COORDINATOR``), then the ``hub`` object of the
settings file (``url``, ``user``, ``passwordFrom``, ``tokenFrom``, ``nkey``, ``creds``,
``tlsCa``, ``tlsCert``, ``tlsKey``, ``host``, ``coordinator``, ``offlineAfter``,
``heartbeat``, ``view``, ``insecure``, ``trust``).

A hub is used only when it lets no unauthenticated client in and this identity cannot publish
outside its own subjects (checked at every connection, see :mod:`fleet._hub.client`), unless
``insecure`` (``--insecure``, ``FLEET_HUB_INSECURE=1`` or the setting ``insecure: true``).

A password or token is never taken from the command line: name
where it comes from (``env:NAME``, ``command:CMD``, ``keyring:SERVICE/USER``), as for API keys.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from fleet._errors import SettingsError
from fleet._hub.names import default_host_id, validate_host_id

DEFAULT_OFFLINE_AFTER: Final = 30.0
DEFAULT_HEARTBEAT: Final = 5.0
DEFAULT_COORDINATOR: Final = "default"

_USERINFO = re.compile(r"(?<=://)[^/@]*@")
_SCHEMES: Final = ("nats", "tls", "ws", "wss")
#: One DNS label: letters, digits and inner hyphens (RFC 1123), at most 63 characters.
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def check_servers(url: str) -> str:
    """``url`` if every comma-separated server in it is a well-formed address
    (``[scheme://][user[:password]@]host[:port]``), else SettingsError naming the first bad one.
    Checked before any connection, so a typing slip is said at once instead of after the
    connection attempts time out."""
    servers = [part.strip() for part in url.split(",") if part.strip()]
    if not servers:
        raise SettingsError(f"the hub address {url!r} names no server")
    for part in servers:
        shown = _USERINFO.sub("", part if "://" in part else f"nats://{part}")
        problem = _server_problem(part)
        if problem:
            raise SettingsError(f"the hub address {shown!r} is not usable: {problem}")
    return url


def _server_problem(part: str) -> str | None:
    if not part.isprintable() or any(c.isspace() for c in part):
        return "it holds a space or a control character"
    try:
        parsed = urllib.parse.urlsplit(part if "://" in part else f"nats://{part}")
        port = parsed.port
    except ValueError as exc:
        return str(exc)
    if parsed.scheme not in _SCHEMES:
        return f"the scheme must be one of {', '.join(_SCHEMES)}, not {parsed.scheme!r}"
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
        return "a server address has no path or query"
    host = parsed.hostname or ""
    if not host:
        return "it names no host"
    if port == 0:
        return "port 0 is not a port a server listens on"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return f"{host!r} is neither an IP address nor a host name"
    try:
        socket.inet_aton(host)
    except OSError:
        return None
    # The resolver reads "0x10" or "127.1" as an IPv4 address (0.0.0.16, 127.0.0.1): almost
    # always a slip, and never what the address looks like.
    return f"{host!r} is read as an IPv4 address in an old short form; write all four numbers"


@attrs.frozen(kw_only=True)
class HubConfig:
    """Where the hub is and how to log in. Secrets are kept out of ``repr``."""

    url: str
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    token: str | None = attrs.field(default=None, repr=False)
    #: a file holding an nkey seed (``SU...``)
    nkey: str | None = None
    #: a ``.creds`` file (JWT and seed)
    creds: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: this host's id, for ``fleet ship``
    host: str | None = None
    #: whose seen marks a coordinator reads and records
    coordinator: str = DEFAULT_COORDINATOR
    #: a host with no heartbeat for this long is offline
    offline_after: float = DEFAULT_OFFLINE_AFTER
    #: how often ``fleet ship`` says it is alive
    heartbeat: float = DEFAULT_HEARTBEAT
    #: use a server that lets anyone in (or lets this identity speak for others)
    insecure: bool = False
    #: the coordinators whose requests ``fleet ship`` acts on
    trust: tuple[str, ...] = ()

    def servers(self) -> list[str]:
        out = []
        for raw in self.url.split(","):
            part = raw.strip()
            if part:
                out.append(part if "://" in part else f"nats://{part}")
        return out

    def display(self) -> str:
        """The servers, without any user or password written into a URL."""
        return ",".join(_USERINFO.sub("", s) for s in self.servers())

    def host_id(self) -> str:
        return self.host or default_host_id()

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments of ``nats.connect`` for the credentials and TLS."""
        opts: dict[str, Any] = {}
        if self.user is not None:
            opts["user"] = self.user
            if self.password is not None:
                opts["password"] = self.password
        if self.token is not None:
            opts["token"] = self.token
        if self.nkey is not None:
            opts["nkeys_seed"] = self.nkey
        if self.creds is not None:
            opts["user_credentials"] = self.creds
        tls = self.tls_ca or self.tls_cert or any(s.startswith("tls://") for s in self.servers())
        if tls:
            try:
                context = ssl.create_default_context(cafile=self.tls_ca)
                if self.tls_cert:
                    context.load_cert_chain(self.tls_cert, self.tls_key)
            except (OSError, ssl.SSLError) as exc:
                raise SettingsError(f"cannot use the hub's TLS files: {exc}") from None
            opts["tls"] = context
        return opts


def _setting(settings: Mapping[str, Any], key: str) -> Any:
    value = settings.get(key)
    return None if value in ("", None) else value


def hub_settings(settings_path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The ``hub`` object of the settings file ({} when there is none)."""
    from fleet._settings import read_raw

    hub = read_raw(settings_path).get("hub")
    if hub is None:
        return {}
    if not isinstance(hub, dict):
        raise SettingsError("the settings key hub must be an object (url, user, ...)")
    return hub


def _secret(spec: str | None, env_value: str | None, setting: Any, what: str) -> str | None:
    from fleet._keys import resolve_key

    if spec:
        return resolve_key(spec)
    if env_value:
        return env_value
    if setting:
        if not isinstance(setting, str):
            raise SettingsError(f"settings hub.{what}From must be text (env:NAME, ...)")
        return resolve_key(setting)
    return None


def _seconds(value: Any, what: str, default: float) -> float:
    if value is None:
        return default
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"hub {what} must be a number of seconds, not {value!r}") from None
    if not out > 0 or out == float("inf"):
        raise SettingsError(f"hub {what} must be more than 0 seconds, not {value!r}")
    return out


def resolve_hub(
    url: str | None = None,
    *,
    user: str | None = None,
    password_from: str | None = None,
    token_from: str | None = None,
    nkey: str | None = None,
    creds: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    host: str | None = None,
    coordinator: str | None = None,
    offline_after: float | None = None,
    heartbeat: float | None = None,
    insecure: bool | None = None,
    trust: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    settings_path: str | os.PathLike[str] | None = None,
    option: str = "--hub URL",
) -> HubConfig:
    """The hub configuration from the arguments, the environment and the settings file;
    ``option`` is how the calling command takes the address (for the error without one)."""
    env = os.environ if environ is None else environ
    cfg = hub_settings(settings_path)

    def pick(arg: Any, env_name: str, key: str) -> Any:
        if arg is not None:
            return arg
        if env.get(env_name):
            return env[env_name]
        return _setting(cfg, key)

    chosen = pick(url, "FLEET_HUB", "url")
    if not chosen or not isinstance(chosen, str):
        raise SettingsError(
            f"no hub named: pass {option}, set FLEET_HUB, or `fleet settings set hub.url URL`"
        )
    who = pick(coordinator, "FLEET_COORDINATOR", "coordinator") or DEFAULT_COORDINATOR
    this_host = pick(host, "FLEET_HOST", "host")
    return HubConfig(
        insecure=_insecure(insecure, env.get("FLEET_HUB_INSECURE"), cfg.get("insecure")),
        trust=_trust(trust, cfg.get("trust")),
        url=check_servers(chosen),
        user=pick(user, "FLEET_HUB_USER", "user"),
        password=_secret(password_from, env.get("FLEET_HUB_PASSWORD"), cfg.get("passwordFrom"),
                         "password"),
        token=_secret(token_from, env.get("FLEET_HUB_TOKEN"), cfg.get("tokenFrom"), "token"),
        nkey=pick(nkey, "FLEET_HUB_NKEY", "nkey"),
        creds=pick(creds, "FLEET_HUB_CREDS", "creds"),
        tls_ca=pick(tls_ca, "FLEET_HUB_TLS_CA", "tlsCa"),
        tls_cert=pick(tls_cert, "FLEET_HUB_TLS_CERT", "tlsCert"),
        tls_key=pick(tls_key, "FLEET_HUB_TLS_KEY", "tlsKey"),
        host=validate_host_id(str(this_host)) if this_host else None,
        coordinator=validate_host_id(str(who)),
        offline_after=_seconds(
            offline_after if offline_after is not None else cfg.get("offlineAfter"),
            "offlineAfter", DEFAULT_OFFLINE_AFTER,
        ),
        heartbeat=_seconds(
            heartbeat if heartbeat is not None else cfg.get("heartbeat"), "heartbeat",
            DEFAULT_HEARTBEAT,
        ),
    )


def _insecure(arg: bool | None, env_value: str | None, setting: Any) -> bool:
    if arg:
        return True
    if env_value not in (None, ""):
        if env_value not in ("0", "1"):
            raise SettingsError(f"FLEET_HUB_INSECURE must be 1 or 0, not {env_value!r}")
        return env_value == "1"
    if setting not in (None, False, True):
        raise SettingsError("settings hub.insecure must be true or false")
    return setting is True


def _trust(arg: Sequence[str] | None, setting: Any) -> tuple[str, ...]:
    if arg:
        names = list(arg)
    elif setting is None or setting == "":
        return ()
    elif isinstance(setting, str):
        names = [n.strip() for n in setting.split(",") if n.strip()]
    else:
        raise SettingsError("settings hub.trust must be coordinator names, comma-separated")
    return tuple(dict.fromkeys(validate_host_id(n) for n in names))


def view_by_default(settings_path: str | os.PathLike[str] | None = None) -> bool:
    """Whether the settings make this machine read the hub without ``--hub``."""
    return hub_settings(settings_path).get("view") is True
