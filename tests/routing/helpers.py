"""Builders for profiles and quota readings used across the routing tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet._core.routing import Profile, Quota, QuotaWindow

NOW = 1_789_000_000.0


def sub(
    name: str,
    *,
    session: float | None = 10,
    weekly: float | None = 20,
    state: str = "ok",
    scoped: tuple[str, float] | None = None,
    fetched_at: float = NOW - 60,
    model: str | None = None,
) -> Profile:
    """A subscription profile named ``tool:name`` with a quota reading."""
    tool = name.split(":", 1)[0]
    return Profile(
        name=name,
        tool=tool,
        kind="subscription",
        model=model,
        config_dir=Path(f"/profiles/{name.replace(':', '-')}"),
        quota=Quota(
            state=state,
            fetched_at=fetched_at,
            session=None if session is None else QuotaWindow(used_percent=session),
            weekly=None if weekly is None else QuotaWindow(used_percent=weekly),
            scoped=None
            if scoped is None
            else QuotaWindow(used_percent=scoped[1], label=scoped[0]),
        ),
    )


def api(name: str, model: str = "z-ai/glm-5.3") -> Profile:
    return Profile(
        name=name,
        tool="claude",
        kind="api",
        model=model,
        config_dir=Path(f"/profiles/{name.replace(':', '-')}"),
        label="openrouter.ai",
    )


def item(name: str, **extra: Any) -> dict[str, Any]:
    """A ProfileListItem as `clausona list --json` prints it."""
    tool = name.split(":", 1)[0]
    base: dict[str, Any] = {
        "name": name,
        "tool": tool,
        "email": f"{name.split(':')[1]}@example.com",
        "configDir": f"/home/me/.{tool}-{name.split(':')[1]}",
        "isPrimary": False,
        "isActive": False,
        "today": {"cost": 0, "inputTokens": 0, "outputTokens": 0},
    }
    base.update(extra)
    return base
