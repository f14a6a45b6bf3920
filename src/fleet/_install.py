"""How this fleet was installed, and so how to add an optional extra to it.

fleet is installed from a checkout or a built wheel (``pipx install .``, ``uv tool install .``,
``pip install fleet_agents-*.whl``); its distribution is ``fleet-agents``. A hint that names a
package index would send a user to an unrelated package (``fleet`` on PyPI is another project),
so every install hint is made here, from what the installer recorded (PEP 610's
``direct_url.json``): the checkout or wheel fleet came from, and the tool that put it there.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlparse

import attrs

#: The name fleet is built and installed under; the import name and the command are `fleet`.
DISTRIBUTION: Final = "fleet-agents"

#: What each optional extra brings, for installing it beside an existing fleet.
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "mcp": ("mcp>=2.3,<3",),
    "hub": ("nats-py>=2.7", "nkeys>=0.2"),
}


@attrs.frozen(kw_only=True)
class Installation:
    """Where the running fleet came from."""

    version: str
    #: The checkout or wheel it was installed from, when the installer recorded one.
    source: str | None
    editable: bool
    #: ``pipx``, ``uv`` (a uv tool), or ``pip`` (any other environment).
    tool: str
    python: str


def version() -> str:
    """fleet's version, as installed (``unknown`` when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def installation() -> Installation:
    from importlib.metadata import PackageNotFoundError, distribution

    source: str | None = None
    editable = False
    tool = "pip"
    try:
        dist = distribution(DISTRIBUTION)
    except PackageNotFoundError:
        dist = None
    if dist is not None:
        try:
            recorded = json.loads(dist.read_text("direct_url.json") or "null")
        except ValueError:
            recorded = None
        if isinstance(recorded, dict) and isinstance(recorded.get("url"), str):
            url = urlparse(recorded["url"])
            if url.scheme == "file":
                source = unquote(url.path)
            dir_info = recorded.get("dir_info")
            editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    # Each tool leaves its own file in the environment it made for an application.
    prefix = Path(sys.prefix)
    if (prefix / "pipx_metadata.json").is_file():
        tool = "pipx"
    elif (prefix / "uv-receipt.toml").is_file():
        tool = "uv"
    return Installation(version=version(), source=source, editable=editable, tool=tool,
                        python=sys.executable)


def extra_hint(extra: str) -> str:
    """The command that gives this fleet the optional ``extra``, as one line."""
    found = installation()
    spec = shlex.quote(f"{found.source or '/path/to/fleet'}[{extra}]")
    if found.tool == "pipx":
        return f"pipx install --force {spec}"
    if found.tool == "uv":
        return f"uv tool install --force {spec}"
    if found.source is None:
        # Run from a source tree with no record of an install: the packages themselves.
        packages = " ".join(shlex.quote(p) for p in EXTRAS.get(extra, (extra,)))
        return f"{shlex.quote(found.python)} -m pip install {packages}"
    return f"{shlex.quote(found.python)} -m pip install {'-e ' if found.editable else ''}{spec}"
