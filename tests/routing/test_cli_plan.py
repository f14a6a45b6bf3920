"""`fleet plan`, `fleet profiles`, TASKS.toml parsing, and the clausona argv builder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from fleet._cli import main
from fleet._core.routing import Choices, Settings, profiles_from_json
from fleet._errors import SettingsError
from fleet._launch import profile_tool_args as tool_args
from fleet._plan import load_task_file, load_tasks, plan_tasks

from .helpers import item
from .test_profiles import FAKE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def quota(session: float, weekly: float = 0, state: str = "ok", **extra: Any) -> dict[str, Any]:
    return {
        "state": state,
        "fetchedAt": int(time.time() * 1000),
        "session": {"usedPercent": session, "resetsAt": None},
        "weekly": {"usedPercent": weekly, "resetsAt": None},
        **extra,
    }


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with a coordinator on ~/.claude, three other profiles, and no settings file."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / ".clausona" / "fleet.json"))
    monkeypatch.delenv("FLEET_PROFILES", raising=False)
    for var in ("CLAUDECODE", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED",
                "CODEX_THREAD_ID", "CODEX_CI"):
        monkeypatch.delenv(var, raising=False)
    profiles = [
        item("claude:main", configDir=str(tmp_path / ".claude"), isPrimary=True,
             quota=quota(1)),
        item("claude:work", isActive=True, quota=quota(20, scoped={
            "usedPercent": 97, "resetsAt": None, "label": "Opus"})),
        item("claude:side", quota=quota(60)),
        item("claude:full", quota=quota(95)),
        item("claude:glm", kind="api", label="openrouter.ai", model="z-ai/glm-5.3"),
        item("codex:work", quota=quota(5, state="cooldown")),
    ]
    (tmp_path / "profiles.json").write_text(json.dumps(profiles))
    (tmp_path / "briefs").mkdir()
    (tmp_path / "tasks.toml").write_text(
        'repo = "."\nbase = "main"\n'
        '[[task]]\nname = "paths"\nbrief = "briefs/paths.md"\n'
        '[[task]]\nname = "rename"\nkind = "wide-mechanical"\n'
        '[[task]]\nname = "deep"\nkind = "exploratory"\nmodel = "claude-opus-5"\n'
        '[[task]]\nname = "check-paths"\nchecker_of = "paths"\n'
    )
    return tmp_path


def test_plan_json(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", str(world / "tasks.toml"), "--profiles",
                         str(world / "profiles.json"), "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    rows = {r["task"]: r for r in data["tasks"]}
    assert {t: r["profile"] for t, r in rows.items()} == {
        "paths": "claude:work",
        "rename": "claude:glm",
        "deep": "claude:side",
        "check-paths": "claude:side",
    }
    assert data["needsOk"] is True and data["complete"] is True
    assert data["coordinator"] == "claude:main" and data["maxUsage"] == 90
    assert rows["paths"]["launch"] == ["clausona", "run", "claude:work", "--"]
    assert rows["paths"]["configDir"] == "/home/me/.claude-work"
    assert rows["rename"]["model"] == "z-ai/glm-5.3"
    assert rows["check-paths"]["checkerOf"] == "paths"
    assert "third profile" in rows["check-paths"]["reason"]


def test_plan_table_shows_rules_warnings_and_the_ok(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = world / ".clausona" / "fleet.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"routing": ["keep GLM off src/"], "maxUsage": 50}))
    code, out, _ = run(capsys, "plan", str(world / "tasks.toml"), "--profiles",
                       str(world / "profiles.json"), "--assign", "deep=claude:full")
    assert code == 0
    assert "your routing rules" in out and "keep GLM off src/" in out
    assert "deep: claude:full: 5H usage 95% >= maxUsage 50%" in out
    assert "ready to start" in out
    # claude:side is at 60% with maxUsage 50, so the checker of paths (on claude:work) goes to
    # the only other profile with room: the API one.
    (check_line,) = [ln for ln in out.splitlines() if ln.startswith("check-paths")]
    assert check_line.split()[1] == "claude:glm"
    code, out, _ = run(capsys, "plan", str(world / "tasks.toml"), "--profiles",
                       str(world / "profiles.json"), "--use", "claude:side")
    assert (
        "no eligible profile (claude:side: 5H usage 60% >= maxUsage 50% "
        "| 5 other profiles: not among the profiles named)"
    ) in out
    assert out.rstrip().splitlines()[-1] == (
        "not ready: some tasks have no eligible profile: name one (--assign) or free one up"
    )
    assert code == 4, "a plan that cannot start every task is refused"
    assert "ready to start" not in out.replace("not ready", "") and "ask before" not in out


def test_plan_use_replaces_workers_and_start_skips_the_ok(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "plan", str(world / "tasks.toml"), "--profiles",
                       str(world / "profiles.json"), "--use", "claude:side", "--use",
                       "claude:glm", "--start", "--json")
    assert code == 0
    data = json.loads(out)
    assert {r["profile"] for r in data["tasks"]} <= {"claude:side", "claude:glm", None}
    assert data["needsOk"] is False


def test_plan_with_a_codex_coordinator(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", str(world / "tasks.toml"), "--profiles",
                       str(world / "profiles.json"), "--coordinator-tool", "codex", "--json")
    assert code == 0
    data = json.loads(out)
    # codex:work is cooling down, so Claude profiles take the work; no Codex profile's
    # configDir is ~/.codex, so the coordinator is unknown and said to be.
    assert data["coordinator"] is None
    assert any("coordinator's own profile is unknown" in w for w in data["warnings"])
    assert all("no codex profile is eligible" in r["reason"] for r in data["tasks"]
               if r["profile"] and not r["named"])


def test_plan_errors_are_one_line(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = str(world / "tasks.toml")
    profiles = str(world / "profiles.json")
    for argv, message in [
        (["plan", str(world / "none.toml"), "--profiles", profiles], "no task file"),
        (["plan", tasks, "--profiles", profiles, "--assign", "paths"], "use TASK=PROFILE"),
        (["plan", tasks, "--profiles", profiles, "--assign", "x=claude:a"], "no task 'x'"),
        (["plan", tasks, "--profiles", str(world / "nope.json")], "cannot read profiles"),
    ]:
        code, out, err = run(capsys, *argv)
        assert code == 1 and out == "" and err.count("\n") == 1 and message in err, err


def test_plan_help_documents_the_task_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    for word in ("[[task]]", "checker_of", "wide-mechanical", "needsOk", "--assign"):
        assert word in out


def test_profiles_json_and_table(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "profiles", "--profiles", str(world / "profiles.json"), "--json")
    data = {p["name"]: p for p in json.loads(out)}
    assert data["claude:main"]["coordinator"] is True
    assert data["claude:main"]["worker"] is False
    assert data["claude:main"]["why"] == ["the coordinator's own profile"]
    assert data["claude:work"]["worker"] is True and data["claude:work"]["headroom"] == 80
    assert "Opus" in data["claude:work"]["notes"][0]
    assert data["claude:full"]["worker"] is False
    assert data["claude:glm"]["kind"] == "api" and data["claude:glm"]["quota"] is None
    assert data["codex:work"]["why"][0].startswith("quota state cooldown")
    assert data["claude:work"]["quota"]["stale"] is False
    code, out, _ = run(capsys, "profiles", "--profiles", str(world / "profiles.json"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["PROFILE", "TOOL", "KIND", "MODEL"]
    assert any(ln.startswith("* claude:main") for ln in lines)
    assert "5H usage 95% >= maxUsage 90%" in out


def test_profiles_through_the_fake_clausona(
    world: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = world / "state.json"
    state.write_text(json.dumps({"list_error": "Cannot read ~/.clausona/profiles.json"}))
    monkeypatch.setenv("CLAUSONA_FAKE", str(state))
    monkeypatch.setenv("FLEET_CLAUSONA", str(FAKE))
    code, out, err = run(capsys, "profiles")
    assert code == 1 and out == ""
    assert err == "fleet: clausona list failed (exit 1): Cannot read ~/.clausona/profiles.json\n"


# --------------------------------------------------------------------------------------------
# TASKS.toml


def test_task_file_paths_are_relative_to_it(world: Path) -> None:
    spec = load_task_file(world / "tasks.toml")
    assert spec.repo == world and spec.base == "main"
    assert spec.tasks[0].brief == world / "briefs" / "paths.md"
    assert [t.name for t in load_tasks(world / "tasks.toml")] == [
        "paths", "rename", "deep", "check-paths"
    ]
    assert spec.choices == Choices()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[task]]\nname = 'a'\nprofle = 'x'\n", "unknown key profle"),
        ("[[task]]\nname = 'Bad Name'\n", "must be a worker id"),
        ("[[task]]\nbrief = 'x'\n", "has no name"),
        ("[[task]]\nname = 'a'\ntool = 'emacs'\n", "tool must be claude or codex"),
        ("[[task]]\nname = 'a'\nkind = 'urgent'\n", "kind must be one of"),
        ("[[task]]\nname = 'a'\n[[task]]\nname = 'a'\n", "a repeats"),
        ("[[task]]\nname = 'a'\nchecker_of = 'b'\n", "checks 'b', not a task"),
        ("[[task]]\nname = 'a'\nchecker_of = 'a'\n", "cannot check itself"),
        ("repo = '.'\n", "has no [[task]] tables"),
        ("[task]\nname = 'a'\n", "has no [[task]] tables"),
        ("tasks = 1\n[[task]]\nname = 'a'\n", "unknown key tasks"),
        ("use = 3\n[[task]]\nname = 'a'\n", "use must be a list"),
        ("start = 'yes'\n[[task]]\nname = 'a'\n", "start must be true or false"),
        ("[[task]]\nname = 'a'\nmodel = ''\n", "model must be non-empty text"),
        ("[[task]\n", "is not valid TOML"),
    ],
)
def test_bad_task_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(text)
    with pytest.raises(SettingsError) as err:
        load_task_file(path)
    assert message in str(err.value)


def test_task_file_use_and_start(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("use = 'claude:glm'\nstart = true\n[[task]]\nname = 'a'\nprofile = 'glm'\n")
    spec = load_task_file(path)
    assert spec.choices == Choices(use=("claude:glm",), start_now=True)
    assert spec.tasks[0].profile == "glm"


def test_plan_tasks_library_call(tmp_path: Path) -> None:
    profiles = profiles_from_json([
        item("claude:main", configDir=str(tmp_path / ".claude"), quota=quota(0)),
        item("claude:work", quota=quota(10)),
    ])
    result = plan_tasks(
        load_tasks(_one_task(tmp_path)),
        profiles=profiles,
        settings=Settings(),
        coordinator_tool="claude",
        env={"HOME": str(tmp_path)},
    )
    assert result.coordinator == "claude:main"
    assert result.row("a").profile == "claude:work"


def _one_task(tmp_path: Path) -> Path:
    path = tmp_path / "one.toml"
    path.write_text("[[task]]\nname = 'a'\n")
    return path


# --------------------------------------------------------------------------------------------
# clausona's fleet rules


def test_tool_args_follow_clausona_fleet_rules() -> None:
    claude, glm, codex = profiles_from_json([
        item("claude:work"), item("claude:glm", kind="api", model="glm"), item("codex:work"),
    ])
    perms = {"claude": "acceptEdits", "codex": "on-request"}
    assert tool_args(claude, model="sonnet", effort="high", permissions=perms) == [
        "--permission-mode", "acceptEdits", "--strict-mcp-config", "--model", "sonnet",
        "--effort", "high",
    ]
    assert tool_args(glm)[-1] == "--tools=Bash,Read,Edit,Write,Grep,Glob"
    assert tool_args(codex, model="gpt-5", permissions=perms, strict_mcp=False) == [
        "-s", "workspace-write", "-a", "on-request", "-c", "check_for_update_on_startup=false",
        "-m", "gpt-5",
    ]
