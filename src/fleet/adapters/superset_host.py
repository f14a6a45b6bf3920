"""The Superset host service client: manifest discovery, bearer token, tRPC with superjson.

The desktop app and ``superset start`` write ``$SUPERSET_HOME_DIR/host/<org>/manifest.json``
(``{pid, endpoint, authToken, startedAt, organizationId}``). Queries are ``GET
/trpc/<proc>?input={"json": …}``, mutations ``POST /trpc/<proc>`` with body ``{"json": …}``;
results come back as ``{"result": {"data": {"json": …}}}`` and errors as ``{"error": {"json":
{"message", …}}}``. A 404 "No procedure found" means the host's API moved on: it is reported as
:class:`HostAPIChanged`, never as a generic failure.

The token goes in one header and nowhere else: not in reprs, messages or logs.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx

from fleet._errors import ToolError

log = logging.getLogger("fleet.adapters.superset")

__all__ = [
    "HostAPIChanged",
    "HostManifest",
    "NoHost",
    "SupersetHost",
    "SupersetHostError",
    "discover_host",
]


class SupersetHostError(ToolError):
    """The Superset host service answered with an error (``status`` is the HTTP status)."""

    def __init__(self, message: str, *, status: int | None = None, procedure: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.procedure = procedure


class HostAPIChanged(SupersetHostError):
    """A procedure fleet calls is gone from this Superset build."""


class NoHost(SupersetHostError):
    """No live Superset host service was found on this machine."""


@attrs.frozen(kw_only=True)
class HostManifest:
    path: Path
    pid: int
    endpoint: str
    token: str = attrs.field(repr=False)
    organization_id: str | None = None


def superset_home(home: Path | None = None) -> Path:
    if home is not None:
        return home
    env = os.environ.get("SUPERSET_HOME_DIR")
    return Path(env) if env else Path.home() / ".superset"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError):
        return False
    return True


def discover_host(
    home: Path | None = None, *, alive: Callable[[int], bool] = pid_alive
) -> HostManifest:
    """The first live host manifest under ``<home>/host/*/manifest.json`` (sorted), skipping
    unreadable ones and those whose pid is dead."""
    root = superset_home(home) / "host"
    names = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    for name in names:
        path = root / name / "manifest.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        pid, endpoint, token = data.get("pid"), data.get("endpoint"), data.get("authToken")
        if not (isinstance(endpoint, str) and isinstance(token, str)):
            continue
        if not isinstance(pid, int) or isinstance(pid, bool) or not alive(pid):
            continue
        org = data.get("organizationId")
        return HostManifest(
            path=path,
            pid=pid,
            endpoint=endpoint.rstrip("/"),
            token=token,
            organization_id=org if isinstance(org, str) else None,
        )
    raise NoHost(
        f"no running Superset host service found under {root}. Open the Superset app, or run "
        "`superset start`"
    )


class SupersetHost:
    """tRPC calls to one host service, through one httpx client (``transport`` for tests)."""

    def __init__(
        self,
        manifest: HostManifest,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 180.0,
    ) -> None:
        self.manifest = manifest
        self._client = httpx.Client(
            base_url=manifest.endpoint,
            headers={"Authorization": f"Bearer {manifest.token}"},
            transport=transport,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return f"SupersetHost(endpoint={self.manifest.endpoint!r})"

    def close(self) -> None:
        self._client.close()

    def query(self, procedure: str, input: Any = None) -> Any:
        params = {} if input is None else {"input": json.dumps({"json": input})}
        return self._call("GET", procedure, params=params)

    def mutate(self, procedure: str, input: Any = None) -> Any:
        return self._call("POST", procedure, body={"json": input})

    def _call(
        self,
        method: str,
        procedure: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
    ) -> Any:
        url = f"/trpc/{procedure}"
        try:
            if method == "GET":
                response = self._client.get(url, params=params)
            else:
                response = self._client.post(url, json=body)
        except httpx.TimeoutException:
            raise SupersetHostError(
                f"the Superset host at {self.manifest.endpoint} did not answer {procedure} in "
                "time",
                procedure=procedure,
            ) from None
        except httpx.TransportError as exc:
            raise SupersetHostError(
                f"cannot reach the Superset host at {self.manifest.endpoint}: "
                f"{type(exc).__name__}",
                procedure=procedure,
            ) from None
        try:
            payload = response.json()
        except ValueError:
            payload = None
        message = self._message(payload)
        if response.status_code == 404 and message.startswith("No procedure found"):
            raise HostAPIChanged(
                f"the Superset host API has changed ({procedure} is gone). Update fleet, or log "
                "the Superset CLI in with `superset auth login` so fleet uses it instead",
                status=404,
                procedure=procedure,
            )
        if response.status_code == 401:
            raise SupersetHostError(
                f"the Superset host refused fleet's credentials for {procedure} (HTTP 401); "
                f"its manifest {self.manifest.path} may be stale: restart Superset",
                status=401,
                procedure=procedure,
            )
        if not response.is_success:
            raise SupersetHostError(
                f"{procedure} failed: {message or f'HTTP {response.status_code}'}",
                status=response.status_code,
                procedure=procedure,
            )
        try:
            return payload["result"]["data"]["json"]
        except (KeyError, TypeError):
            raise SupersetHostError(
                f"{procedure}: the Superset host answered without a tRPC result",
                status=response.status_code,
                procedure=procedure,
            ) from None

    def _message(self, payload: Any) -> str:
        try:
            message = str(payload["error"]["json"]["message"])
        except (KeyError, TypeError):
            return ""
        # A host never should, but if it echoes the token back it stops here.
        return message.replace(self.manifest.token, "<redacted>")
