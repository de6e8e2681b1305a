"""The ``quire`` command. ``quire hub …`` is dispatched to the hub package (imported lazily:
the replica never imports the hub); everything else runs here.

Every command takes ``--json``: it then prints exactly one JSON document on stdout (errors
as ``{"error": {"code", "message", "details"}}``) and exits non-zero on failure.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from replica.app import service
from replica.app.service import error_doc, hub_for, open_client
from replica.cli import exitcodes
from replica.machine.home import Home
from shared.errors import InvalidRequest, LocalError, QuireError

# The work is in replica/app/service.py; this module parses arguments and prints results.
# Everything heavier (the HTTP client, SQLAlchemy, the sync engine, key handling) is
# imported by the commands that use it: every `quire` run pays for what it imports.


class UsageError(QuireError):
    code = "usage"
    status = 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


# ---------------------------------------------------------------- output


class Out:
    def __init__(self, as_json: bool):
        self.json = as_json

    def say(self, text: str) -> None:
        if not self.json:
            print(text, flush=True)

    def doc(self, doc: dict[str, Any], human: str | None = None) -> None:
        if self.json:
            print(json.dumps(doc, ensure_ascii=False, sort_keys=True), flush=True)
        elif human is not None:
            print(human, flush=True)

    def progress(self, label: str) -> tuple[Callable[..., None] | None,
                                            Callable[[], None]]:
        """A progress bar on a terminal (never with --json); (update, stop)."""
        if self.json or not sys.stderr.isatty():
            return None, lambda: None
        from replica.cli import progressbar

        return progressbar.start(label)


# ---------------------------------------------------------------- output of status


def usage_line(u: dict[str, Any]) -> str:
    """``3 of 1000 entries, 2.1 KiB of 4.0 GiB, history 5.0 KiB of 16.0 GiB``."""
    def of(n: int | None, limit: int, size: bool) -> str:
        show = _size if size else str
        if n is None:  # a reader with read rules is not told the space's totals (D142)
            return f"(not shown) of {show(limit)}" if limit else "(not shown)"
        return f"{show(n)} of {show(limit)}" if limit else f"{show(n)} (no quota)"
    q = u.get("quota") or {}
    return (f"{of(u['entries'], q.get('entries', 0), False)} entries, "
            f"{of(u['bytes'], q.get('bytes', 0), True)}, "
            f"history {of(u['history_bytes'], q.get('history_bytes', 0), True)}")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _human_status(doc: dict[str, Any]) -> str:
    from replica.cli.humanout import state
    from shared.humanize import when

    h = doc["head"]
    lines = [f"space {doc['space']['name']}  state: {state(doc['state'])}",
             f"  vault:  {doc['vault']}",
             "  head:   " + (f"seq {h['seq']} {h['digest'][:12]}" if h
                              else "none (never synced)"),
             f"  outbox: {doc['outbox']} unpublished local change(s) in the store",
             f"  last sync: {when(doc.get('last_sync'))}"
             + ("" if doc.get("last_success") == doc.get("last_sync") else
                f" (last success: {when(doc.get('last_success'))})")]
    u = doc.get("unpublished")
    if u is not None:
        how = "vault scanned" if u["scanned"] else "vault not scanned (--fast)"
        lines.append(f"  local:  {u['count']} change(s) not yet published ({how})")
        lines += [f"          {e}" for e in u["entries"]]
        if u["more"]:
            lines.append(f"          … and {u['count'] - len(u['entries'])} more")
    if doc.get("usage"):
        lines.append("  usage:  " + usage_line(doc["usage"]) + " (at the last sync)")
    for c in doc["conflicts"]:
        lines.append(f"  held:   {c['entry']} (conflict in {', '.join(c['fields'])})")
    for e in doc.get("vault_waiting") or []:  # docs/replica.md, "A save that races a sync"
        lines.append(f"  waiting: {e}: the sync's write of this file waits until it is not "
                     "being saved (the next sync writes it)")
    for p in doc["problems"]:
        where = f"{p['path']}:{p['line']}" if p.get("line") else p["path"]
        lines.append(f"  problem: {where}: {p['reason']}")
    for d in doc.get("policy_denied") or []:
        lines.append(f"  policy_denied: {d['id']} ({d['action']}, rule {d['rule']}): kept "
                     "locally, not published")
    lines += _screened_lines(doc.get("content_screened") or [], "  screened: ")
    if doc.get("vault_missing"):
        lines.append(f"  vault missing: {doc['vault_missing']['message']}")
    if doc.get("deletes_held"):  # replica/engine/mass_delete.py
        from replica.engine.mass_delete import describe

        lines.append(f"  deletes held: {describe(doc['deletes_held'])}")
    if doc.get("ignore_file_invalid"):
        lines.append(f"  ignore file: {doc['ignore_file_invalid']['message']}")
    if doc.get("ignored") is not None:
        lines.append(f"  ignored: {len(doc['ignored'])} file(s) left out (.quireignore, "
                     "editor scratch)")
        lines += [f"    {path}" for path in doc["ignored"]]
    if doc["last_error"]:
        e = doc["last_error"]
        lines.append(f"  last error: {e['code']}: {e['message']} ({when(e.get('at'))})")
    if doc.get("suspended"):
        lines.append(f"  suspended: {doc['suspended']['reason']}: the hub refuses this replica; "
                     "local edits and the outbox are kept and publish once access returns")
    return "\n".join(lines)


# ---------------------------------------------------------------- commands


def machine_name() -> str | None:
    """This machine's guess at a new member's display name, used only when neither the
    member nor the invite names them: the account's full name (the first field of its
    GECOS entry), else the account name (docs/decisions.md D138)."""
    import getpass

    try:
        import pwd

        full = pwd.getpwuid(os.getuid()).pw_gecos.split(",")[0].strip()
        if full:
            return full[:100]
    except (ImportError, KeyError, AttributeError, OSError):
        pass  # no passwd entry (a container's uid, Windows): the account name
    try:
        return getpass.getuser()[:100] or None
    except Exception:  # noqa: BLE001 - no account name: the hub uses the device name
        return None


def _ask_name(out: Out) -> Callable[[str], str | None] | None:
    """Ask a person at a terminal for their display name, offering the hub's default;
    None (not asked) under --json or without a terminal on both ends."""
    if out.json or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None

    def ask(offered: str) -> str | None:
        sys.stderr.write(f"your display name, as your team sees it [{offered}]: ")
        sys.stderr.flush()
        try:
            return sys.stdin.readline().strip() or None
        except (OSError, KeyboardInterrupt):
            return None

    return ask


def cmd_join(args: argparse.Namespace, out: Out) -> int:
    if (args.invite is None) == (args.space is None):
        raise InvalidRequest("give either --invite CODE or --space NAME (a space you are "
                             "a member of, on a device signed in with 'quire login')")
    asked = None
    if args.space is not None:
        doc = service.join_space(Home(), args.url, args.space, vault=args.vault,
                                 say=out.say, progress=out.progress,
                                 attachments=args.attachments, only=args.only)
    else:
        asked = None if args.name else _ask_name(out)
        doc = service.join(Home(), args.url, args.invite, vault=args.vault,
                           device=args.device, name=args.name, default_name=machine_name(),
                           choose_name=asked, say=out.say, progress=out.progress,
                           attachments=args.attachments, only=args.only)
    url, name = doc["hub"]["url"], doc.pop("device_name")
    # a name nobody chose here (no --name, no prompt): say which, and how to change it
    named = ""
    if doc.get("new_user") and doc.get("user_name") and not args.name and asked is None:
        whence = ("the invite's" if doc.get("name_source") == "invite"
                  else "a guess from this account")
        named = (f"\nyour name as the team sees it: {doc['user_name']!r} ({whence}; "
                 "'quire admin users name me NAME' changes it)")
    if doc.get("already_joined"):
        out.doc(doc, f"{doc['space']['name']} is already joined here, in "
                     f"{doc['space']['vault']}")
    elif doc["space"] is None:
        out.doc(doc, f"joined hub {url} as device {name!r} (no space: owner enrollment)"
                     f"{named}\nnext: quire admin space create team-memory   # or any name")
    elif doc.get("rejoined"):
        out.doc(doc, f"access to {doc['space']['name']} restored; next: quire sync "
                     f"{doc['space']['name']}")
    else:
        status = doc["status"]
        out.doc(doc, f"vault written to {doc['space']['vault']} "
                     f"({len(doc['sync']['merged'])} merged, "
                     f"head seq {status['head']['seq'] if status['head'] else 0}){named}")
    return 0


JOIN_EPILOG = """\
Two replicas on one machine (a team of two tried on a laptop, two agents that must not share
a device): give each its own home before it joins, one terminal each:

  export QUIRE_HOME=$PWD/alice
  quire join http://127.0.0.1:8470 --invite CODE --vault ./alice-memory

  export QUIRE_HOME=$PWD/bob
  quire join http://127.0.0.1:8470 --invite ANOTHER_CODE --vault ./bob-memory

A home holds the device key, the credentials and the stores; two joins in one home are one
device. On separate machines leave QUIRE_HOME unset (default: the user data folder).

A second machine of yours needs no invite: sign it in, then join by space name:

  quire login http://127.0.0.1:8470       # approve with 'quire devices approve CODE'
  quire join http://127.0.0.1:8470 --space team-memory --vault ./team-memory
"""


def cmd_spaces(args: argparse.Namespace, out: Out) -> int:
    home = Home()
    spaces = home.spaces()
    hubs = {h.hub_id: h.url for h in home.hubs()}
    rows = [dict(s.to_json(), hub_url=hubs.get(s.hub_id)) for s in spaces]
    if out.json:
        out.doc({"spaces": rows})
        return 0
    from replica.cli.humanout import table

    out.doc({}, table(["space", "id", "role", "vault", "hub"],
                      [[s.name, s.space_id, s.role or "?", s.vault, hubs.get(s.hub_id)]
                       for s in spaces], empty="no space joined"))
    return 0


def cmd_sync(args: argparse.Namespace, out: Out) -> int:
    home = Home()
    space = home.space(args.space)
    report, status = args.run_sync(home, space, out.progress(f"syncing {space.name}"),
                                   confirm_deletes=args.confirm_deletes)
    r = report.to_json()
    from replica.app import changelog  # what it pulled and pushed, page by page, by name

    pulled = sum(len(c["ops"]) for c in report.changes if c["direction"] == "pulled")
    human = [f"synced {space.name}: pulled {pulled} change(s), pushed {r['pushed']} "
             f"change(s)" + (" (snapshot)" if r["snapshot"] else "")]
    if report.changes:
        human += changelog.lines(report.changes, changelog.names_for(home, space,
                                                                     report.changes),
                                 changelog.me(home, space), prefix="  ")
    for e in r["merged"]:
        human.append(f"  merged: {e}")
    # every held entry, not only those this sync held: the state says conflicts until each
    # one is resolved (docs/cli.md)
    for e in sorted(set(r["held"]) | {c["entry"] for c in status["conflicts"]}):
        human.append(f"  held in conflict: {e} (your version stays in the vault)")
    for e in r.get("vault_waiting") or []:
        human.append(f"  not written yet: {e} (the file is being saved; the next sync "
                     "writes it)")
    for p in r["problems"]:
        where = f"{p['path']}:{p['line']}" if p.get("line") else p["path"]
        human.append(f"  not published: {where}: {p['reason']}")
    for d in r["policy_denied"]:
        human.append(f"  refused locally (policy_denied): {d['message']}")
    for d in r.get("dangling") or []:  # replica/app/backlinks.py: a hint, not a failure
        human.append(f"  links to nothing in {d['page']}: "
                     + ", ".join(f"[[{t}]]" for t in d["links"])
                     + " (quire links fix OLD NEW rewrites links to a renamed page)")
    if r.get("dangling"):  # the renames this sync published: the command for each
        human += [f"  renamed {o['from']} to {o['id']}: quire links fix "
                  f"{shlex.quote(o['from'])} {shlex.quote(o['id'])}"
                  for c in r.get("changes") or [] if c.get("own")
                  for o in c.get("ops") or [] if o.get("action") == "renamed"]
    human += _screened_lines(r.get("content_screened") or [],
                             "  kept back (content_screened): ")
    human += [f"  held (version_blocked): {b['message']}"
              for b in r.get("version_blocked") or []]
    if r.get("deletes_held"):  # replica/engine/mass_delete.py
        from replica.engine.mass_delete import describe

        human.append(f"  {describe(r['deletes_held'])}")
    for pg in r.get("purged") or []:  # replica/engine/purge.py
        human.append(f"  purged by an admin: {pg['id']} ({pg['reason']})"
                     + ("; your unpublished edit is kept, held" if pg["held"] else ""))
    doc = dict(status, sync=r)
    code = exitcodes.for_status(doc)
    if code == exitcodes.ATTENTION:
        human.append("left for you (exit 3): " + _left_over(doc))
    out.doc(doc, "\n".join(human))
    return code


def _screened_lines(screened: list[dict[str, Any]], prefix: str) -> list[str]:
    """One line per finding (never the matched text: it may be a secret)."""
    out = []
    for d in screened:
        out.append(f"{prefix}{d['id']} (version {d['version'][:12]}): kept locally, "
                   "not published")
        out += [f"      line {f['line']}: {f['rule']} (fingerprint {f['fingerprint']})"
                for f in d["findings"]]
    return out


def _left_over(doc: dict[str, Any]) -> str:
    parts = []
    if doc["conflicts"]:
        parts.append(f"{len(doc['conflicts'])} held in conflict (quire conflicts list)")
    if doc["problems"]:
        parts.append(f"{len(doc['problems'])} file(s) that cannot be published (fix them)")
    if doc.get("policy_denied"):
        parts.append(f"{len(doc['policy_denied'])} change(s) the space rules refuse")
    screened = doc.get("content_screened") or (doc.get("sync") or {}).get("content_screened")
    if screened:
        parts.append(f"{len(screened)} change(s) kept back by content screening")
    if not parts and doc.get("outbox"):
        parts.append(f"{doc['outbox']} change(s) not published yet (quire sync)")
    return "; ".join(parts) or doc["state"]


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    from replica.ipc.status_file import human_watcher, overall, watcher_status

    space = Home().space(args.space)
    watcher = watcher_status(space)  # the watcher's own status file (watch.json)
    # the worst of the replica's state and its running watcher's (a suspended watcher
    # makes the space suspended)
    doc = dict(overall(service.status_doc(space, scan=not args.fast, store=args.store),
                       watcher),
               watcher=watcher)
    if getattr(args, "ignored", False):
        from replica.vault.ignore import ignored_files

        doc["ignored"] = ignored_files(Path(space.vault))
    out.doc(doc, "\n".join([_human_status(doc), *human_watcher(doc["watcher"])]))
    return exitcodes.for_status(doc) if args.strict else exitcodes.OK


def cmd_verify(args: argparse.Namespace, out: Out) -> int:
    """The store against the last signed head, the vault against the store, and with
    ``--hub`` the hub against itself (replica/app/selfcheck.py). Exit 6 on any difference."""
    from replica.app import selfcheck
    from replica.cli.exitcodes import OK, UNVERIFIED

    if args.evidence is not None:  # offline: no home, no hub (replica/cli/evidence.py)
        from replica.cli import evidence

        code, doc, human = evidence.check(args.evidence)
        out.doc(doc, human)
        return code
    home = Home()
    doc = selfcheck.run(home, home.space(args.space), with_hub=args.hub)
    out.doc(doc, selfcheck.human(doc))
    return OK if doc["ok"] else UNVERIFIED


def cmd_watch(args: argparse.Namespace, out: Out) -> int:
    """Keep spaces current (replica/watch/daemon.py); --install writes the systemd unit."""
    home = Home()
    spaces = [home.space(s) for s in args.spaces] if args.spaces else home.spaces()
    if not spaces and not args.uninstall:
        home.space(None)  # raises not_joined with the usual advice
    names = [s.name for s in spaces]
    if args.install or args.uninstall:
        from replica.watch.unit import install_unit, uninstall_unit

        res = install_unit(home.root, names) if args.install else uninstall_unit(names)
        out.doc(res, f"{'wrote' if args.install else 'removed'} {res['unit']}\n" +
                "\n".join("  " + c for c in res["commands"]))
        return 0
    from replica.watch.daemon import run_watch

    return run_watch(home, spaces, say=out.say, serve=main,  # replica/watch/server.py
                     notify=args.notify)


def cmd_admin(args: argparse.Namespace, out: Out) -> int:
    from replica.cli import identity as identity_cli

    home = Home()
    hub = hub_for(home, getattr(args, "hub", None))
    with open_client(hub) as c:
        if args.noun == "space" and args.verb == "create":
            res = c.create_space(args.name)
            out.doc(res, f"created space {res['space']['name']}\n"
                         f"next: quire admin invite create {res['space']['name']} "
                         "--role editor")
        elif args.noun == "space" and args.verb == "list":
            from replica.cli.humanout import table

            rows = c.spaces()
            out.doc({"spaces": rows}, None if out.json else table(
                ["space", "id", "role", "epoch", "seq"],
                [[s["name"], s["id"], s.get("role", "?"), s.get("epoch"), s.get("seq")]
                 for s in rows], empty="no spaces"))
        elif args.noun == "space" and args.verb in ("delete", "restore"):
            from replica.cli import space_delete as space_delete_cli

            space_delete_cli.run(args, out, c)
        elif args.noun == "space" and args.verb == "show":
            res = c.usage(args.space)
            out.doc(res, f"space {args.space} ({res['space']})\n  usage: {usage_line(res)}")
        elif args.noun == "space" and args.verb == "quota":
            limits = {f"max_{k}": v for k, v in (("entries", args.entries),
                                                 ("bytes", args.bytes),
                                                 ("history_bytes", args.history_bytes))
                      if v is not None}
            res = c.set_quota(args.space, {k: (None if v < 0 else v)
                                           for k, v in limits.items()})
            out.doc(res, f"space {args.space} quota set\n  usage: {usage_line(res)}")
        elif args.noun == "invite" and args.verb == "create":
            if args.owner:
                res = c.create_owner_invite(args.ttl, args.name)
            else:
                if not args.space or not args.role:
                    raise UsageError("give SPACE and --role, or --owner")
                res = c.create_invite(args.space, args.role, args.ttl, args.name)
            from shared.humanize import when

            named = f" for {res['name']}" if res.get("name") else ""
            out.doc(res, f"invite code{named}: {res['code']}\n(single use, expires "
                         f"{when(res.get('expires_at'))}; join with: quire join {hub.url} "
                         f"--invite {res['code']})")
        elif args.noun == "revert":
            from replica.cli import revert as revert_cli

            revert_cli.run(args, out, c, hub)
        elif args.noun == "purge":
            from replica.cli import purge as purge_cli

            purge_cli.run(args, out, c)
        elif args.noun == "screening":
            from replica.cli import screening as screening_cli

            screening_cli.run(args, out, c)
        elif args.noun == "epoch" and args.verb == "bump":
            if args.fork is not None:  # a fork recovery (replica/app/fork_recovery.py)
                from replica.app import fork_recovery
                from replica.cli import evidence

                res = fork_recovery.recover(c, args.space, args.reason,
                                            evidence.read_pair(args.fork), args.dry_run)
                out.doc(res, identity_cli.epoch_text(args.space, res) if args.dry_run
                        else evidence.recovery_text(args.space, res))
            else:
                res = c.bump_epoch(args.space, args.reason, args.dry_run)
                out.doc(res, identity_cli.epoch_text(args.space, res))
        elif not identity_cli.admin(args, out, c, hub):
            raise UsageError(f"unknown admin command {args.noun} {args.verb}")
    return 0


def cmd_doctor(args: argparse.Namespace, out: Out) -> int:
    """Check this machine's setup (replica/cli/doctor.py); each finding says how to fix it."""
    from replica.cli import doctor

    report = doctor.diagnose(Home())
    out.doc(report.to_json(), doctor.human(report))
    return report.exit_code()


def cmd_completion(args: argparse.Namespace, out: Out) -> int:
    """Print or install the shell completion script (replica/cli/completion.py)."""
    from replica.cli import completion

    if args.install:
        res = completion.install(args.shell, build_parser())
        out.doc(res, f"wrote {res['path']}\n" + "\n".join("  " + n for n in res["next"]))
    elif out.json:
        out.doc({"shell": args.shell, "script": completion.script(args.shell, build_parser())})
    else:
        sys.stdout.write(completion.script(args.shell, build_parser()))
    return 0


def cmd_demo(args: argparse.Namespace, out: Out) -> int:
    from replica.cli.demo import run_demo

    return run_demo(out, keep=args.keep)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from replica.cli import identity as identity_cli

    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON document (errors included); non-zero exit on failure")
    p = _Parser(prog="quire", description="Quire: shared memory for teams of AI agents.",
                parents=[common])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("hub", help="run or set up a hub (quire hub --help)", add_help=False)

    j = sub.add_parser("join", parents=[common],
                       help="join a hub (and a space) with an invite, or a space you are a "
                            "member of on a signed-in device",
                       description="Join a hub (and a space) with an invite code, or (--space, "
                                   "after 'quire login') a space you are a member of.",
                       epilog=JOIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    j.add_argument("url", help="the hub's URL, e.g. http://127.0.0.1:8470")
    j.add_argument("--invite", metavar="CODE", help="the invite code")
    j.add_argument("--space", metavar="NAME",
                   help="instead of an invite: a space you are a member of, on a device "
                        "signed in with 'quire login' (a second machine of yours)")
    j.add_argument("--vault", metavar="DIR", help="where to keep the Markdown files "
                                                  "(default: ./<space name>)")
    j.add_argument("--device", metavar="NAME", help="this device's name (default: host name)")
    j.add_argument("--name", metavar="NAME",
                   help="your display name as a new member, as your team sees it (default: "
                        "the invite's name, else this account's full name; asked at a "
                        "terminal; 'quire admin users name me NAME' changes it)")
    j.add_argument("--attachments", choices=("eager", "lazy"), default="eager",
                   help="fetch attachments (images, PDFs) at each sync (eager, the "
                        "default), or only when first read with 'quire read' (lazy)")
    j.add_argument("--only", metavar="PATTERN", nargs="+", action="extend", default=[],
                   help="a partial replica: hold only the entries whose ids match these "
                        "globs, e.g. 'projects/alpha/*' 'guardrail/*' (quire scope changes "
                        "them later)")
    j.set_defaults(func=cmd_join)

    s = sub.add_parser("spaces", parents=[common], help="list the spaces this machine joined")
    s.set_defaults(func=cmd_spaces)

    sy = sub.add_parser("sync", parents=[common], help="scan the vault, pull, merge, push")
    sy.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    sy.add_argument("--confirm-deletes", action="store_true",
                    help="publish local deletes above the mass-delete threshold (held "
                         "otherwise: docs/replica.md, \"Mass deletes\")")
    sy.set_defaults(func=cmd_sync, run_sync=service.run_sync)  # a watcher serving: its own

    st = sub.add_parser("status", parents=[common],
                        help="head, outbox, held conflicts, problems, last error")
    st.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    st.add_argument("--strict", action="store_true",
                    help="exit non-zero unless the state is ok (3: pending, conflicts, "
                         "problems; the error's own code after a failed sync)")
    st.add_argument("--fast", action="store_true",
                    help="do not scan the vault: unpublished from the store alone "
                         "(\"scanned\": false)")
    st.add_argument("--ignored", action="store_true",
                    help="list the vault files a sync leaves out (.quireignore, editor "
                         "scratch and system files)")
    st.set_defaults(func=cmd_status, store=None)

    ve = sub.add_parser("verify", parents=[common],
                        help="check the store against the last signed head and the vault "
                             "against the store (--hub: the hub checks its chain)")
    ve.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    ve.add_argument("--hub", action="store_true",
                    help="also ask the hub to verify its chain from genesis and its audit chain")
    ve.add_argument("--evidence", metavar="FILE", default=None,
                    help="offline, nothing but FILE: do two signed checkpoints prove the hub "
                         "showed two histories? (exit 0 proven, 1 not, 2 no pair in it)")
    ve.set_defaults(func=cmd_verify)
    from replica.cli.witness_cmd import add_parsers as add_witness_parsers

    add_witness_parsers(sub, common, _Parser)

    w = sub.add_parser("watch", parents=[common],
                       help="keep spaces current: hub events, vault edits, backoff")
    w.add_argument("spaces", nargs="*", metavar="SPACE", help="space ids or names "
                   "(default: every joined space)")
    w.add_argument("--install", action="store_true",
                   help="write the systemd user unit for this machine")
    w.add_argument("--uninstall", action="store_true", help="remove that unit")
    w.add_argument("--notify", action="store_true",
                   help="also raise a desktop notification for each pull, conflict and "
                        "refusal (notify-send; skipped where it is not installed)")
    w.set_defaults(func=cmd_watch)

    d = sub.add_parser("demo", parents=[common],
                       help="two replicas on an embedded hub: a clean merge and a held conflict")
    d.add_argument("--keep", action="store_true", help="keep the temporary folder")
    d.set_defaults(func=cmd_demo)

    dr = sub.add_parser("doctor", parents=[common],
                        help="check this machine's setup; every finding says how to fix it")
    dr.set_defaults(func=cmd_doctor)

    from replica.cli.vault_cmd import add_parsers as add_vault_parsers  # vault rebuild

    add_vault_parsers(sub, common)
    from replica.cli.links_cmd import add_parsers as add_links_parsers  # links fix

    add_links_parsers(sub, common)
    from replica.cli.transfer import add_parsers as add_transfer_parsers  # import, export

    add_transfer_parsers(sub, common)

    from replica.cli.scope_cmd import add_parsers as add_scope_parsers  # partial replicas

    add_scope_parsers(sub, common)

    co = sub.add_parser("completion", parents=[common],
                        help="shell completion: print the script, or --install it")
    co.add_argument("shell", choices=["bash", "zsh", "fish"])
    co.add_argument("--install", action="store_true",
                    help="write it where the shell loads completions from")
    co.set_defaults(func=cmd_completion)

    a = sub.add_parser("admin", parents=[common], help="manage the hub (admins and owners)")
    a.add_argument("--hub", metavar="URL", help="which joined hub (default: the only one)")
    nouns = a.add_subparsers(dest="noun", metavar="NOUN", parser_class=_Parser)
    nouns.required = True
    sp = nouns.add_parser("space", parents=[common], help="spaces").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser)
    sp.required = True
    c = sp.add_parser("create", parents=[common], help="create a space (owners)")
    c.add_argument("name")
    sp.add_parser("list", parents=[common], help="spaces this device can see")
    sp.add_parser("show", parents=[common], help="a space's usage and quotas").add_argument(
        "space", metavar="SPACE")
    from replica.cli.space_delete import add_parsers as space_delete_parsers

    space_delete_parsers(sp, common)
    sq = sp.add_parser("quota", parents=[common], help="set a space's quotas (space admins)",
                       description="Set a space's quotas: N (0 = no limit) or -1 for the "
                                   "hub's default; options not given stay as they are.")
    sq.add_argument("space", metavar="SPACE")
    for flag in ("entries", "bytes", "history-bytes"):
        sq.add_argument(f"--{flag}", type=int, metavar="N",
                        help=f"most {flag.replace('-', ' ')} (0: none, -1: the hub's)")
    inv = nouns.add_parser("invite", parents=[common], help="invites").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser)
    inv.required = True
    ic = inv.add_parser("create", parents=[common], help="a single-use invite code")
    ic.add_argument("space", nargs="?", metavar="SPACE")
    ic.add_argument("--role", choices=["viewer", "editor", "admin"])
    ic.add_argument("--owner", action="store_true", help="an owner enrollment code (no space)")
    ic.add_argument("--ttl", type=int, metavar="SECONDS", help="lifetime of the code")
    ic.add_argument("--name", metavar="NAME",
                    help="the new member's display name: offered to them at join (they "
                         "may type another)")
    identity_cli.add_invite_verbs(inv, common)
    ep = nouns.add_parser("epoch", parents=[common], help="epochs").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser)
    ep.required = True
    eb = ep.add_parser("bump", parents=[common],
                       help="start a new epoch (replicas re-snapshot and replay local changes)")
    eb.add_argument("space", metavar="SPACE")
    eb.add_argument("--reason", required=True, metavar="TEXT")
    eb.add_argument("--dry-run", action="store_true",
                    help="report the impact (replicas that re-snapshot, entries carried, "
                         "history left behind); change nothing")
    eb.add_argument("--fork", metavar="EVIDENCE", default=None,
                    help="hub owners: recover from two histories (EVIDENCE as quire verify "
                         "--evidence reads it); this hub's history survives, the witnesses "
                         "are released, replicas republish what they hold from the other")
    identity_cli.add_admin_parsers(nouns, common, _Parser)
    from replica.cli.revert import add_admin_parser as add_revert_parser

    add_revert_parser(nouns, common)
    from replica.cli.purge import add_admin_parser as add_purge_parser

    add_purge_parser(nouns, common)
    from replica.cli.screening import add_admin_parser as add_screening_parser

    add_screening_parser(nouns, common, _Parser)
    a.set_defaults(func=cmd_admin)
    identity_cli.add_parsers(sub, common, _Parser)
    for name, fn in (("delegate", identity_cli.cmd_delegate),
                     ("devices", identity_cli.cmd_devices)):
        sub.choices[name].set_defaults(func=lambda args, out, fn=fn: fn(
            args, out, open_client(hub_for(Home(), getattr(args, "hub", None)))))
    sub.choices["login"].set_defaults(func=lambda args, out: identity_cli.cmd_login(
        args, out, Home()))

    from replica.cli.conflicts import add_parsers  # conflicts …, mcp
    from replica.cli.reads import add_parsers as add_read_parsers  # read, search

    add_parsers(sub, common)
    add_read_parsers(sub, common)
    from replica.cli.pages import add_parsers as add_page_parsers  # log, diff, deleted, restore

    add_page_parsers(sub, common)
    from replica.cli.repin import add_parser as add_repin_parser

    add_repin_parser(sub, common)
    from replica.cli.accept_restore import add_parser as add_accept_restore_parser

    add_accept_restore_parser(sub, common)
    from replica.cli.proposals import add_parser as add_proposals_parser

    add_proposals_parser(sub, common, _Parser)
    return p


_TOKEN = re.compile(r"-[A-Za-z0-9_-]{31}")  # a claim token that starts with '-' (32 chars)


def glue_tokens(argv: list[str]) -> list[str]:
    """``--claim TOKEN`` for a token that starts with ``-`` (minted before tokens stopped
    doing so: replica/conflicts/desk.py ``new_claim_token``), which argparse would read as
    an option: joined into ``--claim=TOKEN``, the form docs/cli.md shows."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--claim" and i + 1 < len(argv) and _TOKEN.fullmatch(argv[i + 1]):
            out.append(f"--claim={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def closed_pipe() -> int:
    """The reader of our output went away (``quire log | head``): stop quietly, exit 0.
    Whatever is still buffered goes to /dev/null, so the interpreter's last flush at exit
    cannot fail again with a traceback."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to redirect
        pass
    return exitcodes.OK


def _translate_once() -> None:
    """argparse passes each of its strings (~300 for our parser) through ``gettext``, which
    looks for a message catalog on disk at every call when there is none (only a found one
    is cached): ~15 ms of every command's start-up. The catalog is looked up once here and
    argparse is given its functions: the same translation, searched for once a process."""
    import gettext

    domain = gettext.textdomain()
    found = gettext.translation(domain, gettext.bindtextdomain(domain), fallback=True)
    argparse._ = found.gettext  # type: ignore[attr-defined]  # argparse's own names
    argparse.ngettext = found.ngettext  # type: ignore[attr-defined]


@functools.cache  # once a process: a watcher serving commands parses again and again
def _parser() -> argparse.ArgumentParser:
    _translate_once()
    return build_parser()  # (completion changes the parser it gets: a fresh one)


def main(argv: list[str] | None = None, served: Callable[[Any], None] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "hub":
        hub_cli = importlib.import_module("hub.cli")  # lazily: the replica never imports hub
        try:
            return int(hub_cli.main(argv[1:]) or 0)
        except BrokenPipeError:
            return closed_pipe()
    out = Out("--json" in argv)
    try:
        args = _parser().parse_args(glue_tokens(argv))
        if served is not None:  # a watcher answers (replica/watch/server.py): may refuse
            served(args)
        return int(args.func(args, out))
    except QuireError as e:
        if out.json:
            out.doc(error_doc(e))
        else:
            print(f"error: {e.message} [{e.code}]", file=sys.stderr)
            if e.details:
                print(f"  details: {json.dumps(e.details, ensure_ascii=False)}", file=sys.stderr)
            if e.code in exitcodes.UNREACHABLE_CODES:
                print(f"  {exitcodes.KEPT}", file=sys.stderr)
        return exitcodes.for_error_code(e.code, e.details)
    except BrokenPipeError:
        return closed_pipe()
    except OSError as e:
        err = LocalError(f"{type(e).__name__}: {e}")
        if out.json:
            out.doc(error_doc(err))
        else:
            print(f"error: {err.message}", file=sys.stderr)
        return exitcodes.ERROR


if __name__ == "__main__":
    sys.exit(main())
