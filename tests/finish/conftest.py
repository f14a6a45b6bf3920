from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _settings_file(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A private settings file, so the user's ~/.clausona/fleet.json never decides a retire."""
    path = tmp_path_factory.mktemp("settings") / "fleet.json"
    monkeypatch.setenv("FLEET_SETTINGS", str(path))
    return path
