"""The coordinator skill: a valid plugin layout, and every command it teaches exists."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from fleet._cli import build_parser

SKILL_ROOT = Path(__file__).resolve().parents[2] / "skill"
SKILL = SKILL_ROOT / "skills" / "fleet" / "SKILL.md"


def _frontmatter(text: str) -> dict[str, str]:
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "SKILL.md must start with YAML frontmatter"
    fields = {}
    for line in match.group(1).splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def test_plugin_manifest_and_skill_frontmatter() -> None:
    manifest = json.loads((SKILL_ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert re.fullmatch(r"[a-z0-9-]+", manifest["name"])
    assert manifest["description"]
    front = _frontmatter(SKILL.read_text())
    assert front["name"] == SKILL.parent.name == "fleet"
    assert len(front["description"]) <= 1024
    assert "fleet" in front["description"]


def _fleet_commands(text: str) -> list[list[str]]:
    """Each `fleet ...` command line in code blocks and inline code."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for raw in block.splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("fleet "):
                found.append(shlex.split(line))
    for inline in re.findall(r"`(fleet [^`]+)`", text):
        words = shlex.split(inline.replace("|", " "))
        if "..." not in inline and "<" not in inline:
            found.append(words)
    return found


def test_every_command_the_skill_teaches_parses(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _fleet_commands(SKILL.read_text())
    assert len(commands) > 10
    parser = build_parser()
    for argv in commands:
        args = argv[1:]
        if "--adapter" in args:  # `--adapter superset|herdr` names two choices
            i = args.index("--adapter")
            if args[i + 1 : i + 3] == ["superset", "herdr"]:
                args = [*args[: i + 1], "superset", *args[i + 3 :]]
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            if exc.code == 0 and "--help" in args:
                continue
            pytest.fail(f"the skill teaches a command fleet does not accept: {argv} ({exc})")
