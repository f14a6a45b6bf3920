"""Run an MCP stdio server and copy every frame it sends to a file: ``mcp_tap.py LOG -- ARGV``.

Stands between a client and the server so a test sees what the server told the client (a
pushed notification, say), whatever the client then does with it. Signals are passed on."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading


def main() -> int:
    log, argv = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: child.send_signal(s))

    def feed() -> None:
        assert child.stdin is not None
        for line in sys.stdin.buffer:
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    assert child.stdout is not None
    with open(log, "ab") as copy:
        for line in child.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            copy.write(line)
            copy.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
