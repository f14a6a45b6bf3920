"""The skill an agent reads: its Markdown tables are tables, and every fleet command it names
exists."""

from __future__ import annotations

import re
from pathlib import Path

from fleet._cli import COMMANDS

SKILL = Path(__file__).resolve().parents[1] / "skill" / "skills" / "fleet" / "SKILL.md"


def _cells(line: str) -> int:
    return len(line.strip().strip("|").split("|"))


def test_every_table_has_a_header_a_rule_and_rows_of_its_width() -> None:
    lines = SKILL.read_text(encoding="utf-8").splitlines()
    blocks: list[list[str]] = []
    for prev, line in zip(["", *lines], lines, strict=False):
        if line.startswith("|"):
            if not prev.startswith("|"):
                blocks.append([])
            blocks[-1].append(line)
    assert blocks
    for block in blocks:
        assert len(block) >= 3, block
        assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", block[1]), block[:2]
        assert {_cells(row) for row in block} == {_cells(block[0])}, block


def test_the_commands_it_names_exist() -> None:
    named = set(re.findall(r"`fleet ([a-z][a-z-]*)", SKILL.read_text(encoding="utf-8")))
    assert named and named <= set(COMMANDS), named - set(COMMANDS)
