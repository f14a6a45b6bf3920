"""A stand-in for ``claude`` and ``codex`` in unit tests: it follows a script of steps.

State lives in ``$FAKE_AGENT_DIR``: ``plan.json`` (a list of steps; the n-th run takes step n,
the last step repeats), ``count`` (runs so far), ``calls.jsonl`` (one line per run: argv, pid,
cwd, the variables fleet sets, a sha256 of every variable that may carry a key, whether stdin is
/dev/null). A step: ``result`` (text), ``error`` (an API status: the run fails with it),
``exit`` (exit code), ``sleep`` (seconds, after writing ``running-<n>``), ``session``,
``stderr``, ``commit`` (a file name to commit in the cwd), ``raw`` (stdout as is),
``background`` (seconds: leave a ``sleep`` running behind, its pid in ``background-<n>``),
``hold`` (a directory: after writing ``running-<n>``, wait until ``go-<n>`` appears in it, at
most two minutes), ``echo`` (the result is ``received: <prompt>``, the run's last argument),
``leak`` (the agent prints its key: in its result and on stderr, each written in two parts
split inside the key, a pause between them), ``hooks`` (hook event names: each is run through
fleet's real hook program, as Claude Code would, before anything else of the step).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

KEY_VARS = ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "FLEET_ENDPOINT_API_KEY",
            "FLEET_TEST_KEY", "OPENAI_API_KEY")
SHOWN = ("FLEET_WORKER", "FLEET_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_BASE_URL",
         "CLAUDE_CODE_MAX_RETRIES", "ANTHROPIC_DEFAULT_SONNET_MODEL",
         "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDECODE", "DISABLE_TELEMETRY")


def main() -> int:
    state = Path(os.environ["FAKE_AGENT_DIR"])
    with (state / "count").open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(n))
    plan = json.loads((state / "plan.json").read_text())
    step = plan[min(n, len(plan)) - 1]
    if step.get("echo"):
        step = {**step, "result": f"received: {sys.argv[-1]}"}
    devnull = os.stat(os.devnull)
    st = os.fstat(0)
    call = {
        "n": n,
        "argv": sys.argv,
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "cwd": os.getcwd(),
        "env": {k: os.environ[k] for k in SHOWN if k in os.environ},
        "key_sha": {
            k: hashlib.sha256(os.environ[k].encode()).hexdigest()
            for k in KEY_VARS if k in os.environ
        },
        "stdin_devnull": (st.st_rdev, st.st_ino) == (devnull.st_rdev, devnull.st_ino),
    }
    with (state / "calls.jsonl").open("a") as f:
        f.write(json.dumps(call) + "\n")
    for hook in step.get("hooks", ()):
        from fleet._hook_command import hook_argv

        payload = {"hook_event_name": hook, "session_id": step.get("session", f"session-{n}"),
                   "cwd": os.getcwd(), "prompt": sys.argv[-1]}
        subprocess.run(hook_argv("claude", home=os.environ["FLEET_HOME"]),
                       input=json.dumps(payload).encode(), check=True, timeout=60)
    if "sleep" in step:
        (state / f"running-{n}").write_text(str(os.getpid()))
        time.sleep(step["sleep"])
    if "hold" in step:
        (state / f"running-{n}").write_text(str(os.getpid()))
        go = Path(step["hold"]) / f"go-{n}"
        end = time.monotonic() + 120
        while not go.exists() and time.monotonic() < end:
            time.sleep(0.02)
    if "background" in step:
        child = subprocess.Popen(["sleep", str(step["background"])], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (state / f"background-{n}").write_text(str(child.pid))
    if "commit" in step:
        Path(step["commit"]).write_text(f"work {n}\n")
        subprocess.run(["git", "add", step["commit"]], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"work {n}"], check=True)
    key = next((os.environ[k] for k in KEY_VARS if k in os.environ), "")
    if step.get("leak"):
        step = {**step, "result": f"{step.get('result', 'ok')} (my key is {key})",
                "stderr": f"debug: Authorization: Bearer {key}"}
    if step.get("stderr"):
        _split_write(sys.stderr, step["stderr"] + "\n", key if step.get("leak") else "")
    codex = Path(sys.argv[0]).name == "codex" or "exec" in sys.argv[1:2]
    session = step.get("session", f"session-{n}")
    if "raw" in step:
        sys.stdout.write(step["raw"])
    elif codex:
        events = [{"type": "thread.started", "thread_id": session}, {"type": "turn.started"}]
        if "error" in step:
            events.append({"type": "error", "message": f"unexpected status {step['error']}"})
            events.append({"type": "turn.failed",
                           "error": {"message": f"unexpected status {step['error']}: "
                                     + step.get("result", "error")}})
        else:
            events.append({"type": "item.completed",
                           "item": {"id": "item_1", "type": "agent_message",
                                    "text": step.get("result", "ok")}})
            events.append({"type": "turn.completed",
                           "usage": {"input_tokens": 10, "cached_input_tokens": 2,
                                     "output_tokens": 5}})
        for e in events:
            sys.stdout.write(json.dumps(e) + "\n")
    else:
        failed = "error" in step
        _split_write(sys.stdout, json.dumps({
            "type": "result",
            "subtype": "success",
            "is_error": failed,
            "api_error_status": step.get("error"),
            "result": step.get("result", "API Error" if failed else "ok"),
            "session_id": session,
            "num_turns": 1,
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
                      "server_tool_use": {"web_search_requests": 0}},
            "total_cost_usd": 0.01,
        }) + "\n", key if step.get("leak") else "")
    sys.stdout.flush()
    return int(step.get("exit", 1 if "error" in step else 0))


def _split_write(stream: object, text: str, key: str) -> None:
    """Write ``text``; when it holds ``key``, in two writes split inside it, a pause between."""
    at = text.find(key) + len(key) // 2 if key and key in text else len(text)
    for part in (text[:at], text[at:]):
        stream.write(part)  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]
        if part and at < len(text):
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
