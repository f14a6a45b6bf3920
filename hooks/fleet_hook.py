"""fleet's hook for Claude Code and Codex: ``python -I -S fleet_hook.py --tool claude --home DIR``.

This file stays tiny on purpose: a script run by path is compiled on every run, while the module it
imports is loaded from its cached bytecode. The hook runs on every tool call, so that matters.
Whatever happens, it prints nothing and exits 0.
"""

import posix  # not os: with -S nothing has imported os, and importing it is costly
import sys

try:
    sys.path.insert(0, __file__.rpartition("/")[0] or ".")
    from fleet_hook_impl import main

    main(sys.argv[1:])
except BaseException:  # the hook must never disturb the agent
    pass
posix._exit(0)  # nothing is buffered; skip the interpreter's teardown
