"""A worker's key never reaches anything fleet writes or prints, even when the agent itself
prints it: journal fields, results, output files, the supervisor's log, the fold cache, and the
output of every command that shows a worker. And a key pasted where a key source belongs is not
echoed back in the error."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet import Fleet
from fleet._cli import main
from fleet._hook_command import hook_argv
from fleet._orchestrate import start_worker
from fleet._redact import MASK, StreamRedactor, redact_value
from tests.conftest import Repo

from .conftest import KEY, FakeAgent
from .test_start import brief, exited

#: The longest piece of a key that may show anywhere (a few characters say nothing).
FRAGMENT = 12


def leaks(data: bytes | str, key: str = KEY) -> list[str]:
    """Every piece of ``key`` of FRAGMENT characters or more found in ``data``."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return sorted({key[i : i + FRAGMENT] for i in range(len(key) - FRAGMENT + 1)
                   if key[i : i + FRAGMENT] in text})


def files_with_the_key(root: Path, key: str = KEY) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and leaks(p.read_bytes(), key)]


@given(st.text(max_size=200), st.lists(st.integers(1, 40), max_size=30), st.integers(0, 3))
def test_a_key_split_over_any_chunks_is_caught(text: str, cuts: list[int], times: int) -> None:
    key = "sk-test-0123456789abcdef"
    stream = (text + key) * times + text
    data = stream.encode()
    redactor = StreamRedactor([key])
    out, pos = b"", 0
    for n in cuts:
        out += redactor.feed(data[pos : pos + n])
        pos += n
    out += redactor.feed(data[pos:]) + redactor.flush()
    assert out == stream.replace(key, MASK).encode()


def test_events_are_redacted_field_by_field() -> None:
    from fleet._core.events import Exited

    event = Exited(ts=1.0, src="headless", result=f"x {KEY} y", session_id="s",
                   usage={"input_tokens": 3})
    clean = redact_value(event, [KEY])
    assert clean.result == f"x {MASK} y" and clean.session_id == "s" and clean.usage == event.usage
    assert redact_value(clean, [KEY]) is clean  # nothing left to change: the same object


def test_an_agent_that_prints_its_key_leaves_it_nowhere(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    fake.plan([{"result": "FLEET_WORKER_DONE: done", "leak": True}])
    opts = fake.options(endpoint="http://127.0.0.1:9/", key_from="env:FLEET_TEST_KEY")
    start_worker("api-1", task=brief(tmp_path), repo=repo.path, options=opts)
    (done,) = exited(home, "api-1")
    assert done.result is not None and f"(my key is {MASK})" in done.result
    state = Fleet(home).state("api-1")
    assert (state.state, state.reason) == ("done", "claimed")
    out = home / "workers" / "api-1" / "headless" / "run-1-1.out"
    err = out.with_suffix(".err")
    assert MASK in out.read_text() and f"Bearer {MASK}" in err.read_text()
    assert fake.calls()[0]["env"]["FLEET_WORKER"] == "api-1"
    shown = []
    for argv in (["status"], ["status", "--json"], ["log", "api-1"], ["log", "api-1", "--json"],
                 ["report"], ["report", "--json"], ["workspace", "read", "api-1"],
                 ["workspace", "read", "api-1", "--json"], ["workspace", "show", "api-1"],
                 ["wait", "api-1", "--json"], ["doctor", "--json"]):
        main(argv)
        captured = capsys.readouterr()
        shown.append(captured.out + captured.err)
        assert not leaks(captured.out + captured.err), argv
    assert any(MASK in text for text in shown)
    assert files_with_the_key(home) == []
    assert files_with_the_key(Path(state.worktree or "")) == []


def test_the_hook_keeps_credential_values_out_of_the_journal(
    home: Path, tmp_path: Path
) -> None:
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    other = "tok-" + "".join(random.Random(3).choice("abcdefghij0123456789") for _ in range(40))
    # The key where the hook cuts a long final message (it keeps a head and a tail).
    message = "a" * 1015 + KEY + "b" * 3000 + KEY + "c" * 400 + other + "\nFLEET_WORKER_DONE: ok"
    payload = {"hook_event_name": "Stop", "last_assistant_message": message,
               "message": f"token {KEY}", "error": f'{{"auth": "{other}"}}'}
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(home), "FLEET_WORKER": "w1",
           "ANTHROPIC_AUTH_TOKEN": KEY, "FLEET_SECRET_VARS": "MY_GATEWAY_KEY",
           "MY_GATEWAY_KEY": other}
    subprocess.run(hook_argv("claude", home=home), input=json.dumps(payload).encode(), env=env,
                   capture_output=True, timeout=60, check=True)
    journal = (home / "workers" / "w1" / "journal.jsonl").read_bytes()
    assert leaks(journal) == [] and leaks(journal, other) == []
    last = json.loads(journal.splitlines()[-1])
    assert last["message"] == f"token {MASK}"
    assert last["last_assistant_message"].endswith("FLEET_WORKER_DONE: ok")
    assert Fleet(home).state("w1").state == "done"


SOURCES = [KEY, f"env:{KEY}", f"keyring:{KEY}", f"{KEY}:x", "sk-ant-api03-" + "Z" * 80]


@pytest.mark.parametrize("source", SOURCES, ids=["bare", "env", "keyring", "colon", "anthropic"])
def test_a_key_pasted_where_a_source_belongs_is_not_echoed(
    home: Path, repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    task = brief(tmp_path)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(f'[[task]]\nname = "t1"\nbrief = "{task}"\n')
    for argv in (
        ["start", "w1", "--task", str(task), "--repo", str(repo.path), "--endpoint",
         "http://127.0.0.1:9", "--key-from", source],
        ["run", str(tasks), "--repo", str(repo.path), "--endpoint", "http://127.0.0.1:9",
         "--key-from", source, "--json"],
    ):
        assert main(argv) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "not shown" in err
        assert not leaks(err, source.partition(":")[2] or source) and source not in err
    assert not (home / "workers").exists()


def test_a_complete_line_goes_out_at_once() -> None:
    """The supervisor reads the agent's stream from this output as it is written: a finished
    line must not wait for the next chunk (the old redactor held its last bytes back)."""
    redactor = StreamRedactor([KEY])
    line = b'{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}\n'
    assert redactor.feed(line) == line
    assert redactor.feed(f'{{"k":"{KEY[:10]}'.encode()) == b""
    assert redactor.feed(f'{KEY[10:]}"}}\n'.encode()) == f'{{"k":"{MASK}"}}\n'.encode()
