"""fleet's hook for Claude Code and Codex: ``python -I -S fleet_hook.py --tool claude --home DIR``.

This file stays tiny on purpose: a script run by path is compiled on every run, while the module it
imports is loaded from its cached bytecode. The hook runs on every tool call, so that matters.
Whatever happens, it prints nothing and exits 0.
"""

# pathlib would import re: os.path is much cheaper here.

import os
import sys

try:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fleet_hook_impl import main

    main(sys.argv[1:])
except BaseException:  # the hook must never disturb the agent
    pass
os._exit(0)
