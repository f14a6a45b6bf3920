"""ship and hosts; the --hub option of status, log, seen, wait, watch, report, and check, send
and retire of a remote worker (run on its own host)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    age,
    plural,
    print_json,
    seconds,
    table,
)
from fleet._errors import FleetError, Refused, SettingsError

if TYPE_CHECKING:
    from fleet._hub.config import HubConfig
    from fleet._hub.view import HubView

SHIP_HELP = """\
Ship this host's journals to a NATS JetStream hub, so coordinators on other machines see its
workers (`fleet status --hub`, `fleet wait --hub`), and answer their check, send and retire
requests here, with the same guards as on this machine.

Every complete journal line goes to the subject fleet.<host>.<worker>, once: each line's id is
host/worker/offset (JetStream drops a re-send), the cursor moves only after the server
acknowledged, and on every connection it is checked against what the server holds. The
journals stay the truth: while the hub is out of reach, workers keep journaling and shipping
catches up when it is back. A heartbeat every --heartbeat seconds tells coordinators the host
is up; without one for their --offline-after, its workers show `offline`.

The server URL, credentials and TLS files come from the options, else FLEET_HUB,
FLEET_HUB_USER, FLEET_HUB_PASSWORD, FLEET_HUB_TOKEN, FLEET_HUB_NKEY, FLEET_HUB_CREDS,
FLEET_HUB_TLS_CA/CERT/KEY, else the settings' hub object (url, user, passwordFrom, tokenFrom,
nkey, creds, tlsCa, tlsCert, tlsKey, host, heartbeat). Passwords and tokens are never taken on
the command line: name where they come from (env:NAME, command:CMD, keyring:SERVICE/USER).
Runs until interrupted (SIGINT, SIGTERM); --once ships what is there and exits."""

HUB_INIT_HELP = """\
Write what a hub needs to let no one in but this fleet: a nats-server config (JetStream on,
listening on 127.0.0.1:4222 unless --listen, TLS when --tls-cert and --tls-key are given, one
account for the fleet) and one nkey seed file per host and per coordinator (mode 0600). The
server lets each host publish only its own journal and heartbeat subjects and answer only its
own requests, and each coordinator only ask for actions and write its own seen marks.

Run it again, or `fleet hub add-host` / `add-coordinator`, to add identities: those already
there keep their keys. Then start the server with `nats-server -c DIR/nats-server.conf`, copy
each seed file to its machine, and run there the command printed for it."""

HOSTS_HELP = """\
List every host that ships to the hub: online or offline (and why: no heartbeat within
--offline-after seconds, or its `fleet ship` stopped), its last heartbeat, how many workers
it has, and whether it answers remote actions."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ship",
        help="ship this host's journals to a NATS hub and answer remote actions",
        description=SHIP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nats", metavar="URL", help="the hub's server(s), comma-separated")
    p.add_argument("--host", metavar="NAME", help="this host's id (default: its short name)")
    p.add_argument(
        "--heartbeat", type=seconds, metavar="S", help="seconds between heartbeats (default 5)"
    )
    p.add_argument("--user", metavar="USER", help="user name for the server")
    p.add_argument("--password-from", metavar="SRC", help="where the password comes from")
    p.add_argument("--token-from", metavar="SRC", help="where the token comes from")
    p.add_argument("--nkey", metavar="FILE", help="a file holding this host's nkey seed")
    p.add_argument("--creds", metavar="FILE", help="a .creds file (user JWT and seed)")
    p.add_argument("--tls-ca", metavar="FILE", help="CA certificates to check the server with")
    p.add_argument("--tls-cert", metavar="FILE", help="a client certificate (with --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", help="the client certificate's key")
    p.add_argument(
        "--no-actions", action="store_true", help="answer no check, send or retire requests"
    )
    p.add_argument(
        "--allow-commands",
        action="store_true",
        help="let remote checks and retires run --cmd check commands on this host",
    )
    p.add_argument(
        "--coordinator",
        action="append",
        default=[],
        metavar="NAME",
        help="a coordinator whose check, send and retire requests this host acts on "
        "(repeatable; default: settings hub.trust)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="ship to a server that lets anyone in, or lets this host publish for others",
    )
    p.add_argument("--once", action="store_true", help="ship what is there now, then exit")
    add_json(p)
    add_examples(
        p,
        "fleet ship --nats nats://hub.example:4222 --host laptop --nkey laptop.nk "
        "--coordinator desk",
        "fleet ship --nats tls://hub.example:4222 --user ci --password-from env:HUB_PASSWORD",
        "fleet ship --once --json              # the URL from FLEET_HUB or settings",
    )
    p.set_defaults(run=cmd_ship)

    p = sub.add_parser(
        "hosts",
        help="every host that ships to the hub: online or offline, last heartbeat, workers",
        description=HOSTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_hub_args(p)
    add_json(p)
    add_examples(p, "fleet hosts --hub nats://hub.example:4222", "fleet hosts --hub --json")
    p.set_defaults(run=cmd_hosts)

    hub = sub.add_parser(
        "hub", help="set up a hub that lets in only this fleet's hosts and coordinators",
        description=HUB_INIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    hub_sub = hub.add_subparsers(dest="hub_command", metavar="COMMAND", required=True)
    for verb, what in (("init", "write a server config and one credential per identity"),
                       ("add-host", "add one host's credential (the others are kept)"),
                       ("add-coordinator", "add one coordinator's credential")):
        q = hub_sub.add_parser(verb, help=what, description=HUB_INIT_HELP,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("dir", type=Path, metavar="DIR", help="where the config and seeds go")
        if verb == "init":
            q.add_argument("--host", action="append", default=[], metavar="NAME",
                           help="a host that ships (repeatable)")
            q.add_argument("--coordinator", action="append", default=[], metavar="NAME",
                           help="a coordinator that reads the hub and acts (repeatable)")
            q.add_argument("--listen", metavar="HOST:PORT",
                           help="where the server listens (default 127.0.0.1:4222)")
            q.add_argument("--tls-cert", metavar="FILE", help="the server's certificate")
            q.add_argument("--tls-key", metavar="FILE", help="the server certificate's key")
            q.add_argument("--tls-ca", metavar="FILE", help="CA that client certificates need")
            q.add_argument("--store", metavar="DIR", help="JetStream's store (default DIR/store)")
        else:
            q.add_argument("name", metavar="NAME", help="its id")
        add_json(q)
        q.set_defaults(run=cmd_hub_init, hub_verb=verb)
        add_examples(q, *{
            "init": ("fleet hub init ~/fleet-hub --host laptop --host ci --coordinator desk",
                     "fleet hub init ~/fleet-hub --host ci --listen 0.0.0.0:4222 "
                     "--tls-cert hub.pem --tls-key hub.key"),
            "add-host": ("fleet hub add-host ~/fleet-hub buildbox",),
            "add-coordinator": ("fleet hub add-coordinator ~/fleet-hub night-shift --json",),
        }[verb])
    add_examples(
        hub,
        "fleet hub init ~/fleet-hub --host laptop --host ci --coordinator desk",
        "nats-server -c ~/fleet-hub/nats-server.conf",
        "fleet hub add-host ~/fleet-hub buildbox",
    )


def add_hub_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hub (the workers of every host, through NATS JetStream)")
    g.add_argument(
        "--hub",
        nargs="?",
        const=True,
        metavar="URL",
        help="read every host's workers from the hub at URL (alone: FLEET_HUB or the "
        "settings' hub.url); worker ids and marks are then HOST/WORKER",
    )
    g.add_argument(
        "--coordinator",
        metavar="NAME",
        help="whose seen marks the hub keeps (default: settings hub.coordinator, else default)",
    )
    g.add_argument(
        "--offline-after",
        type=seconds,
        metavar="S",
        help="a host with no heartbeat for S seconds is offline (default 30)",
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help="read a hub whose server lets anyone in, or lets this coordinator publish for others",
    )


def _named(args: argparse.Namespace) -> list[str]:
    names: list[str] = []
    for attr in ("workers", "marks", "seen"):
        value = getattr(args, attr, None)
        if isinstance(value, list):
            names += [str(v) for v in value]
    worker = getattr(args, "worker", None)
    if isinstance(worker, str):
        names.append(worker)
    return names


def hub_of(args: argparse.Namespace) -> HubConfig | None:
    """The hub a command reads, or None for this home's journals: --hub, a host-qualified
    worker id or mark, or the settings' hub.view."""
    if not hasattr(args, "hub"):
        return None
    from fleet._hub.config import resolve_hub, view_by_default

    hub = args.hub
    if hub is None and not any("/" in n for n in _named(args)):
        try:
            if not view_by_default():
                return None
        except SettingsError:
            return None
        hub = True
    return warn_insecure(resolve_hub(
        None if hub is True else hub,
        coordinator=args.coordinator,
        offline_after=args.offline_after,
        insecure=getattr(args, "insecure", False),
    ))


def warn_insecure(cfg: HubConfig) -> HubConfig:
    """Say on stderr, every time, that the hub is used without its door checked."""
    if cfg.insecure:
        sys.stderr.write(
            f"fleet: warning: the hub at {cfg.display()} is used insecurely: whoever reaches it "
            "may be let in to speak for a host or make one act (see `fleet hub init`)\n"
        )
        sys.stderr.flush()
    return cfg


def open_view(args: argparse.Namespace, cfg: HubConfig, **kwargs: Any) -> HubView:
    from fleet._core.fold import Policy
    from fleet._home import resolve_home
    from fleet._hub.view import HubView

    quiet = getattr(args, "quiet_after", None)
    policy = Policy(quiet_after=quiet) if quiet is not None else None
    return HubView(cfg, home=resolve_home(args.home), policy=policy, **kwargs).open()


# -- ship --------------------------------------------------------------------------------


def _ship_config(args: argparse.Namespace) -> HubConfig:
    from fleet._hub.config import resolve_hub

    return resolve_hub(
        args.nats,
        user=args.user,
        password_from=args.password_from,
        token_from=args.token_from,
        nkey=args.nkey,
        creds=args.creds,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        host=args.host,
        heartbeat=args.heartbeat,
        option="--nats URL",
        insecure=args.insecure,
        trust=args.coordinator,
    )


def _ship_printer(as_json: bool) -> Any:
    def emit(event: dict[str, Any]) -> None:
        if as_json:
            print_json({"ts": time.time(), **event}, pretty=False)
            return
        kind = event.get("event")
        if kind == "connected":
            text = f"connected to {event['hub']} as host {event['host']}"
            if event.get("trusts") == []:
                text += (" (it acts on no coordinator's requests: name those it trusts with "
                         "--coordinator NAME, or settings hub.trust)")
        elif kind in ("journal-replaced", "journal-shortened", "journal-rewritten"):
            what = str(kind).removeprefix("journal-")
            text = (f"the journal of {event['worker']} was {what}: shipping it again from its "
                    f"first line (generation {event['gen']})")
        elif kind == "resync":
            text = (f"{event['worker']}: the hub does not hold every line sent; sending again "
                    f"from line {event['to']}")
        elif kind == "action":
            text = (f"ran {event['verb']} {event['worker']} for {event.get('by')}: "
                    f"exit {event['exit']}")
        elif kind == "refused":
            text = f"refused a request: {event['why']}"
        elif kind in ("unreachable", "retry"):
            text = f"hub out of reach ({event.get('error')}); journaling goes on, retrying"
        else:
            text = str(kind)
        sys.stdout.write(f"{time.strftime('%H:%M:%S')}  {text}\n")
        sys.stdout.flush()

    return emit


def cmd_ship(args: argparse.Namespace) -> int:
    from fleet._home import resolve_home
    from fleet._hub import client as hc
    from fleet._hub.ship import ShipLock, Shipper

    cfg = warn_insecure(_ship_config(args))
    # A name that does not resolve is said before anything is written in FLEET_HOME.
    asyncio.run(hc.resolve_some(cfg))
    home = resolve_home(args.home)
    shipper = Shipper(
        cfg,
        home,
        actions=not args.no_actions,
        allow_commands=args.allow_commands,
        emit=_ship_printer(args.json),
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await shipper.run(stop, once=args.once)

    with ShipLock(home, shipper.host):
        if not args.json:
            sys.stdout.write(
                f"shipping {home} as host {shipper.host} to {cfg.display()}"
                f"{'' if args.once else ' (Ctrl-C to stop)'}\n"
            )
            sys.stdout.flush()
        asyncio.run(main())
    summary = {"host": shipper.host, "shipped": shipper.shipped, "resets": shipper.resets,
               "workers": len(shipper.cursors)}
    if args.json:
        print_json({"event": "stopped", **summary}, pretty=False)
    else:
        print(f"shipped {plural(shipper.shipped, 'line')} of "
              f"{plural(len(shipper.cursors), 'worker')}")
    return Exit.OK


# -- hosts -------------------------------------------------------------------------------


def cmd_hosts(args: argparse.Namespace) -> int:
    from fleet._hub.config import resolve_hub

    cfg = hub_of(args) or warn_insecure(resolve_hub(
        None, coordinator=args.coordinator, offline_after=args.offline_after,
        insecure=args.insecure))
    with open_view(args, cfg, use_cache=True) as view:
        hosts = view.hosts()
    if args.json:
        print_json(hosts)
        return Exit.OK
    if not hosts:
        print(f"no host ships to {cfg.display()} yet (run `fleet ship` on each host)")
        return Exit.OK
    now = time.time()
    rows = [
        [h.host, h.state, h.reason, f"{age(h.last_beat, now)} ago" if h.last_beat else "never",
         str(h.workers), "-" if h.actions is None else ("yes" if h.actions else "no")]
        for h in hosts
    ]
    print(table(rows, ["host", "state", "reason", "heartbeat", "workers", "actions"]))
    offline = sum(h.state == "offline" for h in hosts)
    print(f"\n{plural(len(hosts), 'host')}, {offline} offline")
    for h in hosts:
        if h.ignored or h.conflicts:
            print(f"{h.host}: {h.ignored} messages ignored (not shipped by {h.host}), "
                  f"{h.conflicts} lines came again with other content; first: {h.first_ignored}")
    return Exit.OK


# -- hub init ----------------------------------------------------------------------------


def cmd_hub_init(args: argparse.Namespace) -> int:
    from fleet._hub.secure import init_hub

    verb = args.hub_verb
    done = init_hub(
        args.dir,
        hosts=args.host if verb == "init" else [args.name] if verb == "add-host" else [],
        coordinators=(args.coordinator if verb == "init"
                      else [args.name] if verb == "add-coordinator" else []),
        listen=getattr(args, "listen", None),
        tls_cert=getattr(args, "tls_cert", None),
        tls_key=getattr(args, "tls_key", None),
        tls_ca=getattr(args, "tls_ca", None),
        store=getattr(args, "store", None),
    )
    trust = [c.name for c in done.coordinators]
    if args.json:
        print_json({
            "config": str(done.config), "url": done.url, "added": list(done.added),
            "hosts": {i.name: str(i.seed_file) for i in done.hosts},
            "coordinators": {i.name: str(i.seed_file) for i in done.coordinators},
        })
        return Exit.OK
    print(f"wrote {done.config}" + (f" (added {', '.join(done.added)})" if done.added else ""))
    print(f"\nstart the server:\n  nats-server -c {done.config}\n")
    for i in done.hosts:
        coords = " ".join(f"--coordinator {c}" for c in trust)
        print(f"on host {i.name}:\n  fleet ship --nats {done.url} --host {i.name} "
              f"--nkey {i.seed_file} {coords}".rstrip())
    for i in done.coordinators:
        print(f"on coordinator {i.name}:\n  FLEET_HUB={done.url} FLEET_HUB_NKEY={i.seed_file} "
              f"FLEET_COORDINATOR={i.name} fleet status --hub")
    print("\ncopy each seed file to its machine only (it is that identity's secret)")
    return Exit.OK


# -- status over the hub -----------------------------------------------------------------


def cmd_status(args: argparse.Namespace, cfg: HubConfig) -> int:
    from fleet._cli.core import STATUS_HEADERS, state_json, status_row

    with open_view(args, cfg, use_cache=not args.no_cache) as view:
        states = view.states(args.workers or None, args.seen)
        hosts = view.hosts()
    if args.json:
        print_json([state_json(s) for s in states])
        return Exit.OK
    if not states:
        print(f"no workers in the hub {cfg.display()} (run `fleet ship` on each host)")
        return Exit.OK
    now = time.time()
    print(table([status_row(s, now) for s in states], STATUS_HEADERS))
    waiting = sum(s.needs_attention for s in states)
    offline = [h.host for h in hosts if h.state == "offline"]
    where = f" on {plural(len(hosts), 'host')}" + (
        f" ({', '.join(offline)} offline)" if offline else "")
    print(f"\n{plural(len(states), 'worker')}{where}, {waiting} "
          f"{'needs' if waiting == 1 else 'need'} attention")
    return Exit.OK


# -- acting on remote workers ------------------------------------------------------------


def _emit(result: Any) -> None:
    if result.stdout:
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr)
        sys.stderr.flush()


def _host_and_worker(view: HubView, worker: str) -> tuple[str, str]:
    from fleet._hub.names import split_worker

    return split_worker(view.resolve(worker))


def cmd_check(args: argparse.Namespace, cfg: HubConfig) -> int:
    with open_view(args, cfg) as view:
        host, worker = _host_and_worker(view, args.worker)
        result = view.act(
            "check",
            host,
            {"worker": worker, "base": args.base, "cmds": list(args.cmds),
             "timeout": args.timeout},
            as_json=args.json,
        )
    _emit(result)
    return result.exit


def cmd_send(args: argparse.Namespace, cfg: HubConfig, text: str) -> int:
    with open_view(args, cfg) as view:
        host, worker = _host_and_worker(view, args.worker)
        result = view.act("send", host, {"worker": worker, "text": text}, as_json=args.json)
    _emit(result)
    return result.exit


def _group(view: HubView, names: Iterable[str]) -> dict[str, list[str]]:
    by_host: dict[str, list[str]] = {}
    for name in names:
        host, worker = _host_and_worker(view, name)
        by_host.setdefault(host, [])
        if worker not in by_host[host]:
            by_host[host].append(worker)
    return by_host


def cmd_retire(args: argparse.Namespace, cfg: HubConfig) -> int:
    if not args.workers and not args.all_done:
        raise Refused("name the workers to retire, or pass --all-done")
    if args.workers and args.all_done:
        raise Refused("pass worker names or --all-done, not both")
    common = {"mode": args.mode, "yes": bool(args.yes), "base": args.base,
              "cmds": list(args.cmds)}
    with open_view(args, cfg) as view:
        if args.all_done:
            hosts = [h.host for h in view.hosts()]
            offline = [h for h in hosts if not view.host_online(h)]
            if offline:
                sys.stderr.write(
                    f"fleet: not asked (offline): {', '.join(offline)}; their done workers "
                    "wait until they ship again\n"
                )
            plan: dict[str, list[str]] = {h: [] for h in hosts if h not in offline}
        else:
            plan = _group(view, args.workers)
            offline = [h for h in plan if not view.host_online(h)]
            if offline:
                # Refused as a whole before anything is done anywhere.
                view.act("retire", offline[0], {}, as_json=args.json)
        results = [
            view.act("retire", host, {**common, "workers": workers,
                                      "all_done": bool(args.all_done)}, as_json=args.json)
            for host, workers in plan.items()
        ]
    if args.json:
        merged: dict[str, Any] = {"mode": None, "outcomes": [], "untouched": []}
        for result in results:
            data = result.json()
            if isinstance(data, dict):
                merged["mode"] = merged["mode"] or data.get("mode")
                for key in ("outcomes", "untouched"):
                    merged[key] += [{**o, "host": result.host} for o in data.get(key, [])]
            if result.stderr:
                sys.stderr.write(result.stderr)
        print_json(merged)
    else:
        for result in results:
            _emit(result)
    worst = max((r.exit for r in results), default=0)
    return Exit.REFUSED if offline and worst == 0 else worst


# -- report over the hub -----------------------------------------------------------------


def cmd_report(args: argparse.Namespace, cfg: HubConfig) -> int:
    from fleet._cli._common import to_jsonable
    from fleet._fleet import Fleet
    from fleet._report import build_report, format_report

    with Fleet(args.home, hub=cfg) as fleet:
        fleet._open_hub(keep_lines=True)
        lines = build_report(fleet, args.workers or None)
    if args.json:
        print_json([to_jsonable(line) for line in lines])
    else:
        print(format_report(lines))
    return Exit.OK


def read_follow_up(path: Path) -> str:
    if not path.is_file():
        raise SettingsError(f"follow-up file {path} does not exist")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"follow-up file {path} is not UTF-8 text (byte {exc.start})") from None


__all__ = ["FleetError", "add_hub_args", "hub_of"]
