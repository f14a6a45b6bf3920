"""End-to-end tests against the real Claude Code and Codex CLIs, run offline against fake model
servers. See conftest.py for the fixtures and helpers."""
