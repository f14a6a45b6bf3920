"""completion: shell completion for bash and zsh, made from the parser itself, so it always
knows every command, action and option this fleet has."""

from __future__ import annotations

import argparse
import shlex

from fleet._cli._common import Exit, add_examples, add_json, print_json

SHELLS = ("bash", "zsh")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help="print shell completion for bash or zsh",
        description="Print a completion script for SHELL: commands, their actions and options, "
        "and worker ids (the fleet home's workers) where a command takes one. Load it from "
        "your shell's startup file.",
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")
    add_json(p)
    add_examples(
        p,
        "fleet completion bash    # in ~/.bashrc: eval \"$(fleet completion bash)\"",
        "fleet completion zsh     # in ~/.zshrc: eval \"$(fleet completion zsh)\"",
    )
    p.set_defaults(run=cmd_completion)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def _takes_worker(parser: argparse.ArgumentParser) -> bool:
    return any(a.metavar == "WORKER" or a.dest in ("worker", "workers")
               for a in parser._actions if not a.option_strings)


def words() -> dict[str, tuple[list[str], bool]]:
    """For each command path ("" for fleet itself, "hooks", "hooks install"): the words that
    may follow it, and whether it takes worker ids."""
    from fleet._cli import build_parser

    out: dict[str, tuple[list[str], bool]] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        children = _subparsers(parser)
        out[path] = (sorted(children) + _options(parser), _takes_worker(parser))
        for name, child in children.items():
            walk(child, f"{path} {name}".strip())

    walk(build_parser(), "")
    return out


def script(shell: str) -> str:
    """The completion script for ``shell``: a bash function (zsh loads it through
    bashcompinit)."""
    table = words()
    cases = []
    for path, (choices, workers) in sorted(table.items()):
        pattern = shlex.quote(path)
        listed = " ".join(choices)
        extra = ' $(_fleet_workers)' if workers else ""
        cases.append(f'        {pattern}) words_="{listed}{extra}" ;;')
    body = "\n".join(cases)
    bash = f"""\
# fleet completion ({shell}): eval "$(fleet completion {shell})"
_fleet_workers() {{
    local home="${{FLEET_HOME:-${{XDG_STATE_HOME:-$HOME/.local/state}}/fleet}}"
    [ -d "$home/workers" ] && ls "$home/workers" 2>/dev/null
}}
_fleet() {{
    local cur path_ i w words_
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    path_=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in -*) continue ;; esac
        case "$path_" in
            "") [ -n "$w" ] && path_="$w" ;;
            *) path_="$path_ $w" ;;
        esac
    done
    while :; do
        case "$path_" in
{body}
        *) # an argument (a worker id, a file): complete for the command before it
           case "$path_" in *" "*) path_="${{path_% *}}" ;; *) path_="" ;; esac
           continue ;;
        esac
        break
    done
    COMPREPLY=($(compgen -W "$words_" -- "$cur"))
}}
"""
    if shell == "zsh":
        return ("autoload -U +X bashcompinit && bashcompinit\n" + bash
                + "complete -F _fleet fleet\n")
    return bash + "complete -F _fleet fleet\n"


def cmd_completion(args: argparse.Namespace) -> int:
    text = script(args.shell)
    if args.json:
        print_json({"shell": args.shell, "script": text})
    else:
        print(text, end="")
    return Exit.OK
