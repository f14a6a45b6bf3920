"""No input to any command produces a traceback.

Every command and subcommand (walked from the real parser, as test_cli_surface does) gets a
corpus of hostile values in each of its arguments, and hostile files wherever it takes a path:
NUL bytes, lone surrogates (what a non-UTF-8 argv becomes), huge and malformed numbers,
malformed marks and worker ids, deeply nested JSON and TOML, non-UTF-8 text, binary garbage,
empty files, directories where files belong, symlink loops, dangling links, FIFOs and
devices. Each case must end with at most one line on stderr, an exit code from the documented
set, no traceback and no "internal error"; a case that fails (exit 1 or 2) writes nothing in
FLEET_HOME. Commands run in-process through ``fleet._cli.main`` (fast), in a scratch working
directory deep enough that no relative path of the corpus ("../../etc") leaves the test's own
directory; the cases that could hang or eat memory if a file were read carelessly (a FIFO,
/dev/zero) run in a subprocess with a timeout and a memory limit, and so do a few with real
non-UTF-8 bytes in argv. A hostile FLEET_HOME (journals of garbage, a journal that is a
directory, a FIFO or a symlink loop, a poisoned fold cache, ...) is an input too.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import hypothesis
import pytest
from hypothesis import strategies as st

from fleet import Fleet, HookEvent
from fleet._cli import build_parser, main
from tests.cli.test_cli_surface import RUN_ALONE, _subcommands, _walk

DOCUMENTED_EXITS = {0, 1, 2, 3, 4}
#: Commands never run with benign arguments only (they would do real, slow work); every case
#: below changes one argument to something hostile.
LEAVES = [(path, p) for path, p in _walk(build_parser())
          if not _subcommands(p) or path in RUN_ALONE]

# -- the corpus --------------------------------------------------------------------------------

DEEP = 100_000
STRINGS: dict[str, str] = {
    "nul": "\x00",
    "nul-inside": "w1\x00x",
    "nul-suffix": "claude\x00",
    "lone-surrogate": "\udcff",
    "surrogate-inside": "caf\udce9",
    "high-surrogate": "\ud800",
    "empty": "",
    "space": " ",
    "dash": "-",
    "newline": "a\nb",
    "tab": "a\tb",
    "carriage-return": "w1\r",
    "escape": "\x1b[2J\x1b[H",
    "huge-int": "99999999999999999999999",
    "negative-huge-int": "-99999999999999999999999",
    "over-int-digits": "9" * 5000,
    "float-max": "1e308",
    "float-overflow": "1e999",
    "inf": "inf",
    "nan": "nan",
    "hex": "0x10",
    "underscore-int": "1_000",
    "arabic-digit": "\u0663",
    "mark-huge": "w1@99999999999999999999999",
    "mark-over-digits": "w1@" + "9" * 5000,
    "mark-huge-quiet": "w1@99999999999999999999999q",
    "mark-negative": "w1@-1",
    "mark-empty": "@",
    "mark-upper": "W1@0",
    "worker-traversal": "../../etc",
    "worker-upper": "W1",
    "worker-long": "a" * 65,
    "worker-dot": ".hidden",
    "worker-slash": "w1/../w2",
    "deep-json": "[" * DEEP + "]" * DEEP,
    "deep-json-object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "json-huge-int": "9" * 5000,
    "json-float-overflow": "1e999",
    "url-garbage": "http://[::1",
    "url-no-host": "http://",
    "key-source-garbage": "env:",
    "long": "x" * 100_000,
    "percent": "%s%n%x",
    "braces": "{0}{worker}",
    "rtl": "\u202eevil",
    "emoji": "\U0001f600" * 10,
    "equals": "a=b=c",
    "json-null": "null",
    "json-true": "true",
    "json-object": "{}",
    "json-string": '"x"',
    "tilde": "~",
    "tilde-user": "~nosuchuser/x",
    "env-var": "$HOME",
    "subshell": "$(true)",
    "glob": "*",
    "dotdot": "..",
    "dot": ".",
    "decomposed": "e\u0301",
    "zero-width": "w\u200b1",
    "bom": "\ufeffw1",
    "fullwidth": "\uff57\uff11",
    "minus-zero": "-0",
    "underflow": "1e-400",
    "plus": "+1",
    "spaces-int": " 5 ",
    "fraction": "5.5",
}

#: Files (made in a fixture) tried wherever an argument may be a path.
FILES = (
    "loop", "dir", "empty", "garbage", "latin1", "nul-bytes", "deep.json", "deep-object.json",
    "deep.toml", "deep-table.toml", "huge-int.json", "huge-int.toml", "float-overflow.json",
    "wrong-types.json", "wrong-types.toml", "tasks-hostile.toml", "dangling", "missing",
    "non-utf8-name", "name-too-long", "dev-null",
)
#: Files that could hang a careless reader (a FIFO with no writer) or fill memory (/dev/zero):
#: run in a subprocess, under a timeout and a memory limit.
RISKY_FILES = ("fifo", "dev-zero")

#: Where an argument takes a path: by its dest.
PATH_DESTS = {"worktree", "task", "tasks", "repo", "settings", "profiles", "config_dir",
              "codex_home", "codex_bin", "path", "file", "brief", "home"}
NUMBER_TYPES = {"seconds", "count", "positive_count"}


def _hostile_files(root: Path) -> dict[str, str]:
    root.mkdir()
    rng = random.Random(7)
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    (root / "dir").mkdir()
    (root / "empty").write_bytes(b"")
    (root / "garbage").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    (root / "latin1").write_bytes("r\xe9sum\xe9 = 'caf\xe9'\n".encode("latin-1"))
    (root / "nul-bytes").write_bytes(b"# brief\x00\nname = \"a\x00b\"\n")
    (root / "deep.json").write_text("[" * DEEP + "]" * DEEP)
    (root / "deep-object.json").write_text('{"a":' * DEEP + "1" + "}" * DEEP)
    (root / "deep.toml").write_text("a = " + "[" * DEEP + "]" * DEEP + "\n")
    (root / "deep-table.toml").write_text("[" + "a." * 20_000 + "b]\nc = 1\n")
    (root / "huge-int.json").write_text('{"maxUsage": ' + "9" * 5000 + ', "workers": []}')
    (root / "huge-int.toml").write_text("x = " + "9" * 5000 + "\n")
    (root / "float-overflow.json").write_text('{"maxUsage": 1e999}')
    (root / "wrong-types.json").write_text(
        '{"workers": 5, "routing": {"a": [1]}, "maxUsage": "x", "retire": [], "permissions": 3,'
        ' "profiles": "no", "hooks": [1, 2]}'
    )
    (root / "wrong-types.toml").write_text(
        'repo = 5\nbase = []\nuse = "x"\nstart = "yes"\ntask = "not a table"\n'
    )
    (root / "tasks-hostile.toml").write_text(
        '[[task]]\nname = "../../etc"\nbrief = "/dev/zero"\n'
        '[[task]]\nname = "b"\nbrief = "' + str(root / "dir") + '"\nkind = "weird"\n'
        '[[task]]\nname = "c"\nbrief = "' + str(root / "loop-a") + '"\ntool = 5\n'
        '[[task]]\nname = "d"\nbrief = "' + str(root / "fifo") + '"\n'
        '[[task]]\nname = "e"\nprofile = "\\u0000"\nmodel = ' + "9" * 30 + "\n"
    )
    (root / "dangling").symlink_to(root / "nowhere")
    os.mkfifo(root / "fifo")
    bad_name = os.fsencode(root) + b"/caf\xe9.md"
    with open(bad_name, "wb") as f:
        f.write(b"# brief\n")
    paths = {name: str(root / name) for name in FILES if (root / name).exists()
             or (root / name).is_symlink()}
    paths.update({
        "loop": str(root / "loop-a"),
        "missing": str(root / "no" / "such" / "file"),
        "non-utf8-name": os.fsdecode(bad_name),
        "name-too-long": str(root / ("n" * 300)),
        "dev-null": "/dev/null",
        "fifo": str(root / "fifo"),
        "dev-zero": "/dev/zero",
    })
    return paths


# -- one case ----------------------------------------------------------------------------------


@attrs.frozen
class World:
    """A home with registered workers, benign arguments, and the hostile files."""

    home: Path
    files: dict[str, str]
    benign: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("hostile")
    home = base / "fleet-home"
    worktree = base / "wt"
    worktree.mkdir()
    bin_dir = base / "bin"  # git and a shell; no agent, clausona, superset or herdr
    bin_dir.mkdir()
    for tool in ("git", "sh", "env", "true", "false", "cat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    brief = base / "brief.md"
    brief.write_text("# Fix it\nMake the tests pass.\n")
    follow_up = base / "follow-up.md"
    follow_up.write_text("also this\n")
    tasks = base / "tasks.toml"
    tasks.write_text(f'[[task]]\nname = "t1"\nbrief = "{brief}"\n')
    settings = base / "fleet.json"
    settings.write_text('{"maxUsage": 80}')
    config = base / "claude-config"
    config.mkdir()
    cwd = base / "cwd" / "a" / "b" / "c" / "d"
    cwd.mkdir(parents=True)
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=worktree)
        fleet.register("w2", worktree=worktree, adapter="headless")
        fleet.record("w1", HookEvent(ts=1.0, src="claude", hook="Stop"))
    benign = {
        "worker": "w1", "workers": "w1", "marks": "w1@1", "worktree": str(worktree),
        "task": str(brief), "tasks": str(tasks), "repo": str(base), "settings": str(settings),
        "profiles": str(base / "none.json"), "config_dir": str(config), "path": str(worktree),
        "file": str(follow_up), "brief": str(brief), "key": "maxUsage", "value": "80",
        "tool": "claude", "profile": "claude:work", "home": str(home), "bin": str(bin_dir),
        "scratch": str(base), "cwd": str(cwd),
    }
    yield World(home=home, files=_hostile_files(base / "files"), benign=benign)


def _value_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.nargs != 0 and a.dest not in ("help", "version")]


def _baseline(path: tuple[str, ...], parser: argparse.ArgumentParser, world: World) -> list[str]:
    """Arguments that parse, chosen so no case does slow or outside work."""
    argv = list(path)
    for action in _value_actions(parser):
        value = world.benign.get(action.dest, "x")
        if action.choices:
            value = next(iter(action.choices))
        if not action.option_strings:
            if action.nargs not in ("*", "?"):
                argv.append(value)
        elif action.required:
            argv += [action.option_strings[0], value]
    if path[0] in ("wait", "watch", "notify"):
        argv += ["--timeout", "0"]
    if path[0] == "notify":
        # One quick try at a closed loopback port: a case never waits on retries.
        argv += ["--attempts", "1", "--webhook", "http://127.0.0.1:9/"]
    if path == ("trust",) or (path[0] == "hooks" and path != ("hooks", "command")):
        argv += ["--config-dir", world.benign["config_dir"]]
    return argv


def _with(argv: list[str], action: argparse.Action, value: str, path: tuple[str, ...]) -> list[str]:
    """``argv`` with ``action`` given ``value`` (replacing what it had)."""
    out = list(argv)
    if action.option_strings:
        flag = action.option_strings[0]
        if flag in out:
            i = out.index(flag)
            del out[i : i + 2]
        return [*out, flag, value]
    # A positional: the n-th value after the command words.
    positionals = [a for a in _value_actions_of(path) if not a.option_strings]
    index = len(path) + positionals.index(action)
    optional = action.nargs in ("*", "?")
    if optional and (len(out) <= index or out[index].startswith("-")):
        out.insert(index, value)  # it had no value: give it one
    else:
        out[index] = value
    return out


_PARSERS = dict(LEAVES)


def _value_actions_of(path: tuple[str, ...]) -> list[argparse.Action]:
    return _value_actions(_PARSERS[path])


def _corpus_for(action: argparse.Action) -> list[str]:
    names = list(STRINGS)
    if action.dest in PATH_DESTS:
        names += [f"file:{f}" for f in FILES]
    return names


def _kind(action: argparse.Action) -> tuple[str, bool, bool, str]:
    """What decides how a value is read before a command sees it: the parser's type, whether
    the value is a choice, whether the command takes it as a path, and how many it takes.
    Values of one kind go through the same reading whatever command they are given to."""
    type_name = getattr(action.type, "__name__", "str") if action.type else "str"
    return type_name, bool(action.choices), action.dest in PATH_DESTS, str(action.nargs)


#: Commands whose benign arguments succeed in the world below, best first: each kind of argument
#: is given its hostile values in the first of these that takes it, so the hostile value, not a
#: refusal the command gives anyway, is what the case tests (test_each_kind_is_tried_where_its_
#: command_succeeds holds this list to that).
SUCCEEDING = [
    ("status",), ("log",), ("seen",), ("watch",), ("report",), ("settings", "set"),
    ("settings", "get"), ("settings", "unset"), ("profiles", "add"), ("profiles", "remove"),
    ("hooks", "install"), ("hooks", "uninstall"), ("hooks", "command"), ("trust",),
    ("wait",),
]


def _representatives() -> dict[tuple[str, bool, bool, str], tuple[tuple[str, ...], str]]:
    """One (command, argument) per kind: in the first succeeding command that has one."""
    rank = {path: i for i, path in enumerate(SUCCEEDING)}
    found: dict[tuple[str, bool, bool, str], tuple[int, tuple[str, ...], str]] = {}
    for path, parser in LEAVES:
        for action in _value_actions(parser):
            key = _kind(action)
            here = (rank.get(path, len(rank)), path, action.dest)
            if key not in found or here < found[key]:
                found[key] = here
    return {key: (path, dest) for key, (_, path, dest) in found.items()}


REPRESENTATIVES = _representatives()
#: Sharp values every argument of every command gets, where its own reading can go wrong: a
#: value too long to echo whole, one that climbs out of a directory, a number past 64 bits.
SHARP = ("long", "worker-traversal", "huge-int")


def _cases() -> list[tuple[tuple[str, ...], str, str]]:
    """Every value of the corpus once per kind of argument, in that kind's representative; the
    sharp values in every argument of every command; a stray positional and a bad --home for
    every command. Wider mixes are the Hypothesis property's."""
    cases: set[tuple[tuple[str, ...], str, str]] = set()
    for path, dest in REPRESENTATIVES.values():
        action = next(a for a in _value_actions(_PARSERS[path]) if a.dest == dest)
        names = ("nul", "lone-surrogate", "long") if action.choices else _corpus_for(action)
        cases.update((path, dest, name) for name in names if not _waits(path, dest, name))
    for path, parser in LEAVES:
        cases.add((path, "extra-positional", "nul"))
        cases.add((path, "--home", "lone-surrogate"))
        for action in _value_actions(parser):
            cases.update((path, action.dest, name) for name in SHARP
                         if not _waits(path, action.dest, name))
    return sorted(cases)


def _waits(path: tuple[str, ...], dest: str, name: str) -> bool:
    return path[0] in ("wait", "watch", "notify") and (dest, name) in _VALID


#: Odd spellings that are still valid durations (Python's float takes them): as a timeout of
#: wait or watch they would only make the case wait that long.
_VALID = {("timeout", name) for name in ("underscore-int", "arabic-digit", "spaces-int",
                                          "fraction", "plus")}


CASES = _cases()


def _resolve(name: str, world: World) -> str:
    if name.startswith("file:"):
        return world.files[name[5:]]
    return STRINGS[name]


def _argv(path: tuple[str, ...], dest: str, name: str, world: World) -> list[str]:
    parser = _PARSERS[path]
    argv = _baseline(path, parser, world)
    value = _resolve(name, world)
    if dest == "extra-positional":
        return [*argv, value]
    if dest == "--home":
        return ["--home", value, *argv]
    action = next(a for a in _value_actions(parser) if a.dest == dest)
    return _with(argv, action, value, path)


def _snapshot(home: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in [home, *home.rglob("*")]:
        if "cache" in p.parts:  # a cache refresh is not a write anyone sees
            continue
        st = p.lstat()
        out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def _check(code: int, err: str, before: dict[str, tuple[int, int]], world: World) -> None:
    assert "Traceback" not in err, err
    assert "internal error" not in err, err
    assert code in DOCUMENTED_EXITS, (code, err)
    assert err.count("\n") <= 1, err
    if code in (1, 2):
        assert _snapshot(world.home) == before, "a failed command wrote in FLEET_HOME"


@pytest.fixture
def hermetic(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    # Relative paths in the corpus ("../../etc", "-", "1e308") resolve in here: deep enough
    # that no `..` chain of the corpus climbs out of the test's own directory.
    monkeypatch.chdir(world.benign["cwd"])
    monkeypatch.setenv("FLEET_HOME", str(world.home))
    monkeypatch.setenv("HOME", world.benign["scratch"])
    monkeypatch.setenv("PATH", world.benign["bin"])
    monkeypatch.setenv("FLEET_WORKTREES", str(Path(world.benign["scratch"]) / "worktrees"))
    for name in ("CLAUSONA", "FLEET_CODEX", "SUPERSET_HOME_DIR", "FLEET_SETTINGS",
                 "FLEET_PROFILES", "CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    return world


@pytest.mark.parametrize(("path", "dest", "name"), CASES,
                         ids=[f"{' '.join(p)}|{d}|{n}" for p, d, n in CASES])
def test_hostile_input_is_one_line_and_a_documented_exit(
    hermetic: World, capsys: pytest.CaptureFixture[str], path: tuple[str, ...], dest: str,
    name: str,
) -> None:
    argv = _argv(path, dest, name, hermetic)
    before = _snapshot(hermetic.home)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: usage errors
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    _, err = capsys.readouterr()
    _check(code, err, before, hermetic)


RISKY = [(path, action.dest) for path, parser in LEAVES for action in _value_actions(parser)
         if action.dest in PATH_DESTS]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("name", RISKY_FILES)
@pytest.mark.parametrize(("path", "dest"), RISKY, ids=[f"{' '.join(p)}|{d}" for p, d in RISKY])
def test_files_that_never_end_neither_hang_nor_fill_memory(
    hermetic: World, path: tuple[str, ...], dest: str, name: str
) -> None:
    argv = _argv(path, dest, f"file:{name}", hermetic)
    before = _snapshot(hermetic.home)
    done = subprocess.run(
        [sys.executable, "-m", "fleet", *argv], capture_output=True, text=True, timeout=60,
        env={**os.environ}, preexec_fn=_limit_memory, check=False, errors="replace",
        cwd=hermetic.benign["cwd"],
    )
    _check(done.returncode, done.stderr, before, hermetic)


RAW_ARGV: list[list[bytes]] = [
    [b"status", b"\xff"],
    [b"log", b"w1\xfe"],
    [b"register", b"w9", b"--worktree", b"/tmp/caf\xe9"],
    [b"start", b"w9", b"--task", b"brief-\xe9.md"],
    [b"seen", b"w1@1\xff"],
    [b"--home", b"/tmp/\xff\xfe", b"status"],
    [b"settings", b"set", b"maxUsage", b"\xff"],
    [b"wait", b"--timeout", b"\xff"],
]


@pytest.mark.parametrize("argv", RAW_ARGV, ids=lambda a: b" ".join(a).decode("latin-1"))
def test_non_utf8_bytes_in_a_real_argv(hermetic: World, argv: list[bytes]) -> None:
    before = _snapshot(hermetic.home)
    done = subprocess.run([os.fsencode(sys.executable), b"-m", b"fleet", *argv],
                          capture_output=True, timeout=60, check=False,
                          cwd=hermetic.benign["cwd"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(b"fleet: argument ") and b"not valid UTF-8" in done.stderr
    _check(done.returncode, done.stderr.decode("utf-8", "replace"), before, hermetic)


def test_the_corpus_covers_every_command_argument_and_kind() -> None:
    assert {path for path, _, _ in CASES} == {path for path, _ in LEAVES}
    every_argument = {(path, a.dest) for path, parser in LEAVES for a in _value_actions(parser)}
    assert every_argument <= {(path, dest) for path, dest, _ in CASES}
    for path, dest in REPRESENTATIVES.values():
        action = next(a for a in _value_actions(_PARSERS[path]) if a.dest == dest)
        if not action.choices:
            tried = {name for p, d, name in CASES if (p, d) == (path, dest)}
            assert tried >= set(_corpus_for(action)) - {n for _, n in _VALID}, (path, dest)
    size = len(STRINGS) + len(FILES) + len(RISKY_FILES) + len(BAD_LINES) + len(RAW_ARGV)
    assert size >= 100


def test_each_kind_is_tried_where_its_command_succeeds(
    hermetic: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile value given to a command that refuses its benign arguments anyway tests the
    refusal, not the value: every kind's representative must succeed with benign arguments
    (wait, which has nothing to wake for, times out), or be a kind no such command takes."""
    failing = {}
    for key, (path, _) in REPRESENTATIVES.items():
        try:
            code = main(_baseline(path, _PARSERS[path], hermetic))
        except SystemExit as exc:
            code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
        _, err = capsys.readouterr()
        if code not in ((0, 3) if path == ("wait",) else (0,)):
            failing[key] = (" ".join(path), code, err.strip())
    assert set(failing) <= KINDS_ONLY_IN_REFUSING_COMMANDS, failing


#: Kinds of argument that only commands needing the outside world take (an agent, a Superset
#: host, a hub): their hostile values are tried where the command refuses anyway.
KINDS_ONLY_IN_REFUSING_COMMANDS = {
    kind for kind, (path, _) in REPRESENTATIVES.items() if path not in SUCCEEDING
}


_ARGUMENTS = [(path, action) for path, parser in LEAVES for action in _value_actions(parser)]


@hypothesis.settings(max_examples=300, derandomize=True, deadline=None, database=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(data=st.data())
def test_any_value_in_any_argument_of_any_command(
    hermetic: World, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    """Beyond the grid: a fixed budget of (command, argument, value) drawn from the whole
    product, the same every run (derandomized), so a value class no grid row pairs with an
    argument is still met."""
    path, action = data.draw(st.sampled_from(_ARGUMENTS), label="argument")
    names = [n for n in _corpus_for(action) if not _waits(path, action.dest, n)]
    name = data.draw(st.sampled_from(names), label="value")
    argv = _argv(path, action.dest, name, hermetic)
    before = _snapshot(hermetic.home)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    _, err = capsys.readouterr()
    _check(code, err, before, hermetic)


# -- a hostile FLEET_HOME ----------------------------------------------------------------------

#: Journal lines no writer of fleet's would produce.
BAD_LINES = [
    b"garbage",
    b"\xff\xfe\x00\x01",
    b"[" * DEEP + b"]" * DEEP,
    b'{"v":1,"ts":1e999,"src":"claude","type":"Stop"}',
    b'{"v":1,"ts":' + b"9" * 5000 + b',"src":"claude","type":"Stop"}',
    b'{"v":99999999999999999999999,"ts":1.0,"src":"claude","type":"Stop"}',
    b'{"v":1,"ts":1.0,"src":"claude","type":"Stop","last_assistant_message":"\\ud800"}',
    b'{"v":1,"ts":1.0,"src":"fleet","type":"registered","worktree":5,"handle":[1]}',
    b'{"v":1,"ts":1.0,"src":"fleet","type":"seen","mark":"w@' + b"9" * 5000 + b'"}',
    b'{"v":1,"ts":1.0,"src":"headless","type":"started","pid":-1,"start_time":"x"}',
    b'{"v":1,"ts":1.0,"src":"headless","type":"started","pid":99999999999999999999}',
    b'{"v":1,"ts":1.0,"src":"headless","type":"exited","exit_code":1e300,"usage":[1]}',
    b'{"v":1,"ts":-1e308,"src":"claude","type":"UserPromptSubmit"}',
    b'{"v":1,"ts":1.0,"src":"claude","type":"' + b"S" * 100_000 + b'"}',
    b'{"v":1,"ts":1.0,"src":"claude","type":"Stop","a":' + b'{"a":' * 900 + b"1" + b"}" * 900
    + b"}",
    b"\x00" * 100,
]


@pytest.fixture
def hostile_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEET_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path))
    with Fleet(home) as fleet:
        fleet.register("bad-lines", worktree=worktree, adapter="headless")
        fleet.register("dir-journal", worktree=worktree)
        fleet.register("loop-journal", worktree=worktree)
        fleet.register("fifo-journal", worktree=worktree)
        fleet.register("ok", worktree=worktree)
    workers = home / "workers"
    with (workers / "bad-lines" / "journal.jsonl").open("ab") as f:
        f.write(b"\n".join(BAD_LINES) + b"\nno newline at the end")
    (workers / "dir-journal" / "journal.jsonl").unlink()
    (workers / "dir-journal" / "journal.jsonl").mkdir()
    loop = workers / "loop-journal" / "journal.jsonl"
    loop.unlink()
    loop.symlink_to(loop)
    (workers / "fifo-journal" / "journal.jsonl").unlink()
    os.mkfifo(workers / "fifo-journal" / "journal.jsonl")
    (workers / "a-file").write_text("not a worker directory")
    (workers / "UPPER").mkdir()
    headless = workers / "bad-lines" / "headless"
    headless.mkdir()
    (headless / "launch.json").write_text("[" * DEEP)
    (headless / "supervisor.json").write_text('{"pid": ' + "9" * 5000 + "}")
    os.mkfifo(headless / "run-1-1.out")
    (home / "worktrees.tsv").write_bytes(b"\xff\t\n\t\t\n" + b"x" * 10000 + b"\n")
    (home / "hook-errors.log").write_bytes(bytes(range(256)) * 10)
    cache = home / "cache"
    for name in ("fold-v2.json",):
        (cache / name).unlink(missing_ok=True)
        (cache / name).write_text('{"version": 2, "workers": {"ok": {"offset": ' + "9" * 5000
                                  + ', "seq": -1, "ino": "x", "fp": 5, "acc": []}}}')
    return home


HOME_COMMANDS = [
    ["status"], ["status", "--json"], ["status", "--no-cache", "--json"],
    ["status", "bad-lines", "ok", "--json"], ["log", "bad-lines"], ["log", "bad-lines", "--json"],
    ["log", "dir-journal"], ["log", "loop-journal"], ["log", "fifo-journal"],
    ["wait", "--timeout", "0"], ["wait", "bad-lines", "--timeout", "0", "--json"],
    ["watch", "--timeout", "0", "--json"], ["report"], ["report", "--json"], ["doctor"],
    ["doctor", "--json"], ["workspace", "show", "bad-lines"], ["workspace", "read", "bad-lines"],
    ["check", "bad-lines", "--json"], ["retire", "--all-done", "--json"],
    ["seen", "bad-lines@3"], ["stop", "bad-lines"], ["send", "bad-lines", "/dev/null"],
    ["answer", "bad-lines", "allow"], ["answer", "dir-journal", "deny", "--json"],
    ["answer", "loop-journal", "allow"], ["answer", "fifo-journal", "allow"],
    ["answer", "bad-lines", "deny", "--request", "0123456789abcdef"],
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv", HOME_COMMANDS, ids=" ".join)
def test_a_hostile_home_gives_one_line_and_a_documented_exit(
    hostile_home: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in DOCUMENTED_EXITS, (code, err)
    assert err.count("\n") <= 1, err
