"""The command line as a whole: every command and subcommand, walked from the real parser, has
help that says what it does and a --json switch; bad input is a usage error or one line on
stderr, and a refused command leaves nothing behind."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from fleet._cli import COMMANDS, build_parser, main
from fleet._cli._common import Exit
from tests.conftest import Repo, git_worktree


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)] if path else []
    for name, child in _subcommands(parser).items():
        found += _walk(child, (*path, name))
    return found


EVERY = _walk(build_parser())
#: Command groups only dispatch to their subcommands (each of which has --json); alone they
#: print their own help and exit 2, so there is nothing for --json to shape.
#: Commands that do something alone and have subcommands too: `fleet profiles` lists the
#: profiles, `fleet profiles add` adds one. They are leaves as well as groups of leaves.
RUN_ALONE = {("profiles",), ("settings",)}
GROUPS = {path for path, parser in EVERY if _subcommands(parser)} - RUN_ALONE
#: Commands that print nothing a --json switch could shape (`mcp serve` speaks MCP on stdout).
NEVER_PRINT: dict[tuple[str, ...], str] = {
    ("mcp", "serve"): "speaks MCP on stdout, and nothing else",
}


def _ids(items: list[tuple[tuple[str, ...], argparse.ArgumentParser]]) -> list[str]:
    return [" ".join(path) for path, _ in items]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help, usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_walk_covers_every_command() -> None:
    assert {path[0] for path, _ in EVERY} == set(COMMANDS)
    assert {("hooks",), ("hub",), ("mcp",), ("superset",), ("workspace",)} == GROUPS
    assert all(_subcommands(parser) for path, parser in EVERY if path in RUN_ALONE)
    assert len(EVERY) > len(COMMANDS)  # subcommands were found too


@pytest.mark.parametrize(("path", "parser"), EVERY, ids=_ids(EVERY))
def test_help_exits_0_and_teaches(
    path: tuple[str, ...], parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *path, "--help")
    assert code == Exit.OK and err == ""
    assert out.startswith(f"usage: fleet {' '.join(path)}")
    # A description, not only the one-line summary of the command list.
    assert parser.description and len(parser.description.split()) >= 8, path


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    text = f"{parser.description or ''}\n{parser.epilog or ''}"
    return [
        line.split("  #")[0].strip()
        for line in text.splitlines()
        if line.startswith("  fleet ")
    ]


LEAVES = [(path, parser) for path, parser in EVERY if path not in GROUPS]


@pytest.mark.parametrize(("path", "parser"), LEAVES, ids=_ids(LEAVES))
def test_help_shows_examples_that_parse(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    examples = _examples(parser)
    assert examples, f"fleet {' '.join(path)} --help shows no example"
    for example in examples:
        argv = shlex.split(example)[1:]
        assert tuple(argv[: len(path)]) == path, example
        args = build_parser().parse_args(argv)  # a usage error raises SystemExit
        assert args.run is not None, example


@pytest.mark.parametrize(("path", "parser"), EVERY, ids=_ids(EVERY))
def test_every_command_that_prints_takes_json(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    options = {o for action in parser._actions for o in action.option_strings}
    if path in GROUPS or path in NEVER_PRINT:
        assert "--json" not in options or path in NEVER_PRINT
        return
    assert "--json" in options, f"fleet {' '.join(path)} prints but has no --json"


@pytest.mark.parametrize("group", sorted(GROUPS), ids=" ".join)
def test_a_group_without_its_subcommand_shows_its_own_help_and_exits_2(
    group: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *group)
    name = " ".join(group)
    assert code == Exit.USAGE
    # Its help on stdout, or (a required subcommand) a one-line error pointing at that help.
    assert out.startswith(f"usage: fleet {name}") or (
        err.startswith(f"fleet: {name}: ") and err.endswith(f"(see `fleet {name} --help`)\n")
    )
    assert "Traceback" not in err


def test_fleet_alone_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == Exit.USAGE and out.startswith("usage: fleet")


@pytest.mark.parametrize(
    "argv",
    [
        ["wait", "--timeout", "-1"],
        ["wait", "--timeout", "nan"],
        ["wait", "--quiet-after", "-5"],
        ["watch", "--timeout", "-1"],
        ["status", "--quiet-after", "-1"],
        ["stop", "w1", "--wait", "-1"],
        ["check", "w1", "--timeout", "-1"],
        ["doctor", "--errors", "-3"],
        ["workspace", "read", "w1", "--lines", "0"],
        ["run", "tasks.toml", "--max-parallel", "0"],
        ["run", "tasks.toml", "--retries", "-1"],
        ["start", "w1", "--task", "brief.md", "--backoff", "-2"],
        ["wait", "--timeout", "soon"],
    ],
    ids=" ".join,
)
def test_negative_or_malformed_numbers_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == Exit.USAGE and out == ""
    assert err.startswith(f"fleet: {argv[0]}") and ": argument --" in err
    assert err.count("\n") == 1 and err.endswith("--help`)\n")
    assert not (home / "workers").exists()  # nothing was journaled


def test_register_refuses_a_worktree_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-worktree"
    code, out, err = run(capsys, "register", "w1", "--worktree", str(missing), "--json")
    assert code == Exit.ERROR and out == ""
    assert err == f"fleet: worktree {missing} is not a directory; nothing registered\n"
    assert not (home / "workers" / "w1").exists()
    assert not (home / "worktrees.tsv").exists()
    code, out, err = run(capsys, "register", "w1", "--worktree", str(tmp_path), "--json")
    assert code == Exit.ERROR and "is not the top directory of a git worktree" in err
    assert not (home / "worktrees.tsv").exists()
    git_worktree(tmp_path)
    code, out, _ = run(capsys, "register", "w1", "--worktree", str(tmp_path), "--json")
    assert code == Exit.OK and json.loads(out)["worktree"] == os.path.realpath(tmp_path)


def test_trust_refuses_a_path_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = tmp_path / "cfg"
    missing = tmp_path / "no-such-worktree"
    code, out, err = run(capsys, "trust", "--config-dir", str(cfg), "--path", str(missing))
    assert (code, out) == (Exit.ERROR, "")
    assert err == f"fleet: {missing} is not a directory; nothing was trusted\n"
    assert not cfg.exists()
    # --check only reads: a missing folder is simply not trusted.
    code, out, _ = run(
        capsys, "trust", "--config-dir", str(cfg), "--path", str(missing), "--check", "--json"
    )
    assert code == Exit.REFUSED and json.loads(out)["trusted"] is False


def test_settings_unset_of_a_key_that_is_not_set_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    absent = tmp_path / "absent.json"
    code, out, _ = run(capsys, "settings", "--settings", str(absent), "unset", "routing")
    assert code == Exit.OK and out == f"routing was not set in {absent}\n"
    assert not absent.exists()
    present = tmp_path / "fleet.json"
    present.write_text('{ "maxUsage": 80 }')  # spacing no rewrite would keep
    code, out, _ = run(
        capsys, "settings", "--settings", str(present), "unset", "routing", "--json"
    )
    assert code == Exit.OK
    assert json.loads(out) == {"file": str(present), "key": "routing", "removed": False}
    assert present.read_text() == '{ "maxUsage": 80 }'
    code, out, _ = run(
        capsys, "settings", "--settings", str(present), "unset", "maxUsage", "--json"
    )
    assert code == Exit.OK and json.loads(out)["removed"] is True
    assert json.loads(present.read_text()) == {}


def test_workspace_read_prints_json(
    capsys: pytest.CaptureFixture[str], worktree: Path
) -> None:
    code, _, _ = run(
        capsys, "register", "w1", "--worktree", str(worktree), "--adapter", "headless"
    )
    assert code == Exit.OK
    code, out, err = run(capsys, "workspace", "read", "w1", "--json")
    assert code == Exit.OK and err == ""
    assert json.loads(out) == {"worker": "w1", "adapter": "headless", "text": ""}


def test_a_task_file_that_is_not_utf8_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.toml"
    tasks.write_bytes(b'\xff\xfe[[task]]\nname = "a"\n')
    for command in ("plan", "run"):
        code, out, err = run(capsys, command, str(tasks), "--json")
        assert (code, out) == (Exit.ERROR, "")
        assert err == f"fleet: {tasks} is not UTF-8 text (byte 0)\n"


def test_send_refuses_a_follow_up_that_is_not_utf8_before_delivering_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    worktree = git_worktree(tmp_path / "wt")
    code, _, _ = run(
        capsys, "register", "w1", "--worktree", str(worktree), "--adapter", "headless"
    )
    assert code == Exit.OK
    follow_up = tmp_path / "follow-up.md"
    follow_up.write_bytes(b"fix the \xff test\n")
    for argv in (["send"], ["workspace", "send"]):
        code, out, err = run(capsys, *argv, "w1", str(follow_up), "--json")
        assert (code, out) == (Exit.ERROR, "")
        assert err == f"fleet: follow-up file {follow_up} is not UTF-8 text (byte 8)\n"
    code, out, _ = run(capsys, "log", "w1", "--json")
    assert [event["type"] for event in json.loads(out)] == ["registered"]  # nothing journaled


def test_status_refuses_a_malformed_seen_mark_as_wait_does(
    capsys: pytest.CaptureFixture[str], worktree: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == Exit.OK
    for command in ("status", "wait"):
        code, out, err = run(capsys, command, "--seen", "garbage", "--json")
        assert (code, out) == (Exit.ERROR, "")
        assert err == "fleet: invalid seen mark 'garbage': expected WORKER@SEQ or WORKER@SEQq\n"
    code, out, _ = run(capsys, "status", "--seen", "w1@0", "--json")
    assert code == Exit.OK and json.loads(out)[0]["worker"] == "w1"


def test_check_says_what_it_runs_on_a_terminal_and_nothing_otherwise(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, repo: Repo
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(repo.path))[0] == Exit.OK
    argv = ["check", "w1", "--cmd", "true", "--cmd", "true", "--json"]
    _code, out, err = run(capsys, *argv)
    assert err == "" and json.loads(out)["worker"] == "w1"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    _code, out, err = run(capsys, *argv)
    assert err == "checking w1: git, then 2 check commands (up to 900s each)...\n"
    assert json.loads(out)["worker"] == "w1"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["register", "w1"], "fleet: register: the following arguments are required: "
         "--worktree (see `fleet register --help`)\n"),
        (["hooks", "command"], "fleet: hooks command: the following arguments are required: "
         "--tool (see `fleet hooks command --help`)\n"),
        (["status", "--no-such-option"],
         "fleet: status: unrecognized arguments: --no-such-option (see `fleet status --help`)\n"),
    ],
)
def test_usage_errors_are_one_line_that_points_at_the_help(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (Exit.USAGE, "", expected)


def test_register_knows_the_adapters_fleet_has(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    from fleet._cli.core import ADAPTER_NAMES
    from fleet.adapters import ADAPTERS

    assert sorted(ADAPTER_NAMES) == sorted(ADAPTERS)
    code, out, err = run(capsys, "register", "w1", "--worktree", str(tmp_path), "--adapter", "tmux")
    assert (code, out) == (Exit.USAGE, "")
    assert err.startswith("fleet: register: argument --adapter: invalid choice: 'tmux'")
    assert not (home / "workers").exists()


@pytest.mark.parametrize("as_json", [False, True])
def test_a_demo_that_goes_wrong_says_why_in_one_line(
    as_json: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet import _demo

    def broken(**_kwargs: object) -> _demo.DemoResult:
        return _demo.DemoResult(
            ok=False, root="/nowhere", kept=False, seconds=1.0, report=(), narration=(),
            problems=("gave up waiting for cli",),
        )

    monkeypatch.setattr(_demo, "run_demo", broken)
    code, out, err = run(capsys, "demo", "--fast", *(["--json"] if as_json else []))
    assert code == Exit.ERROR
    assert err == "fleet: the demo did not run to the end: gave up waiting for cli\n"
    assert (json.loads(out)["problems"] == ["gave up waiting for cli"]) if as_json else out == ""


def test_the_distribution_says_what_fleet_is_and_carries_its_license() -> None:
    import tomllib

    from fleet._cli._common import DISTRIBUTION

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "fleet-agents"
    assert project["scripts"]["fleet"] == "fleet._cli:main"
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert project["authors"] == [{"name": "fleet developers"}]
    assert (root / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) ")
    readme = (root / "README.md").read_text()
    assert "pipx install ." in readme and "uv tool install ." in readme
