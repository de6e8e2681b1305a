"""The ``quire`` command. ``quire hub …`` is dispatched to the hub package (imported lazily:
the replica never imports the hub); everything else runs here.

Every command takes ``--json``: it then prints exactly one JSON document on stdout (errors
as ``{"error": {"code", "message", "details"}}``) and exits non-zero on failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from replica.home import Home, HubConfig, SpaceConfig, space_lock, write_json
from shared.errors import InvalidRequest, LocalError, NotJoined, QuireError

if TYPE_CHECKING:
    from replica.client import HubClient
    from replica.store import Store
    from replica.sync import Replica, SyncReport

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

    def progress(self, label: str) -> tuple[Callable[[int, int | None], None] | None,
                                            Callable[[], None]]:
        """A rich progress bar on a terminal (never with --json); (update, stop)."""
        if self.json or not sys.stderr.isatty():
            return None, lambda: None
        from rich.progress import Progress

        bar = Progress(transient=True)
        task = bar.add_task(label, total=None)
        bar.start()

        def update(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        return update, bar.stop


def error_doc(e: QuireError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message, "details": e.details}}


# ---------------------------------------------------------------- helpers


def _client(hub: HubConfig, transport: Any = None) -> HubClient:
    """A client with this device's DPoP auth flow (replica/auth.py); an agent given a
    delegated token (``quire delegate create``) runs with QUIRE_DELEGATION_TOKEN set."""
    from replica.auth import auth_for, delegated
    from replica.client import HubClient
    from replica.identity import CredentialFile

    creds = CredentialFile(hub.credential_path, hub.key_path)
    auth = auth_for(hub.key_path, creds)
    if auth is None:
        raise NotJoined(f"no device credential for hub {hub.url}; join it again")
    token = os.environ.get("QUIRE_DELEGATION_TOKEN")
    if token:
        auth = delegated(hub.key_path, token, auth.tokens.htu_base)
    return HubClient(hub.url, auth=auth, hub_key=hub.public_key, transport=transport)


def _hub_for(home: Home, args: argparse.Namespace) -> HubConfig:
    ref = getattr(args, "hub", None)
    return home.hub_by_url(ref) if ref else home.default_hub()


def _replica(home: Home, space: SpaceConfig, progress: Any = None) -> tuple[Replica, HubClient,
                                                                          Store]:
    from replica.store import Store
    from replica.sync import Replica
    from shared.signing import load_private

    hub = home.hub(space.hub_id)
    if hub is None:
        raise NotJoined(f"space {space.name} belongs to a hub this machine no longer knows")
    client = _client(hub)
    store = Store(space.store_path)
    agent = os.environ.get("QUIRE_AGENT")
    rep = Replica(space_id=space.space_id, replica_id=space.replica_id, vault=space.vault,
                  store=store, client=client, key=load_private(hub.key_path),
                  progress=progress, provenance={"agent": agent} if agent else None)
    return rep, client, store


SUSPENDING = ("unauthorized", "forbidden", "not_found")


def _refusal(err: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why the hub no longer accepts this replica, from the last sync error (or None)."""
    if not err or err.get("code") not in SUSPENDING:
        return None
    reason = (err.get("details") or {}).get("reason") or (
        "not_a_member" if err["code"] == "not_found" else err["code"])
    return {"reason": reason, "message": err.get("message"), "since": err.get("at")}


def status_doc(space: SpaceConfig) -> dict[str, Any]:
    from replica.store import Store

    saved: dict[str, Any] = {}
    if space.status_path.exists():
        saved = json.loads(space.status_path.read_text(encoding="utf-8"))
    store = Store(space.store_path)
    try:
        head = store.head()
        conflicts = store.conflicts()
        outbox = store.dirty_count()
        doc = {
            "space": {"id": space.space_id, "name": space.name},
            "replica_id": space.replica_id,
            "vault": str(space.vault),
            "head": head.to_json() if head else None,
            "outbox": outbox,
            "outbox_batches": len(store.outbox()),
            "conflicts": [{"entry": c.entry_id, "fields": c.fields,
                           "theirs_author": c.theirs_author, "theirs_seq": c.theirs_seq}
                          for c in conflicts],
            "problems": saved.get("problems", []),
            "policy_denied": saved.get("policy_denied", []),
            "last_error": saved.get("last_error"),
            "last_success": saved.get("last_success"),
            "last_sync": saved.get("last_sync"),
            "role": saved.get("role", space.role),
            "store_digest": store.digest(),
        }
    finally:
        store.close()
    refusal = _refusal(doc["last_error"])
    if refusal is not None:
        # the hub refused this device or replica (revoked, removed): nothing is published,
        # local edits and the outbox stay; the next sync after access returns resumes
        doc["state"] = "suspended"
        doc["suspended"] = refusal
    elif doc["last_error"]:
        doc["state"] = "error"
    elif head is None:
        doc["state"] = "never_synced"
    elif conflicts:
        doc["state"] = "conflicts"
    elif doc["problems"]:
        doc["state"] = "problems"
    elif outbox:
        doc["state"] = "pending"
    else:
        doc["state"] = "ok"
    return doc


def _write_status(space: SpaceConfig, *, report: SyncReport | None, error: QuireError | None,
                  role: str | None) -> None:
    from replica.sync import now_ms

    prev: dict[str, Any] = {}
    if space.status_path.exists():
        prev = json.loads(space.status_path.read_text(encoding="utf-8"))
    now = now_ms()
    doc = {
        "last_sync": now,
        "last_success": now if error is None else prev.get("last_success"),
        "last_error": None if error is None else dict(error_doc(error)["error"], at=now),
        "problems": [p.to_json() for p in report.problems] if report else prev.get(
            "problems", []),
        "role": role or prev.get("role"),
        # local changes the space rules deny (replica/sync.py): kept here, not published
        "policy_denied": report.policy_denied if report else prev.get("policy_denied", []),
    }
    write_json(space.status_path, doc)


def _human_status(doc: dict[str, Any]) -> str:
    h = doc["head"]
    lines = [f"space {doc['space']['name']} ({doc['space']['id']})  state: {doc['state']}",
             f"  vault:  {doc['vault']}",
             "  head:   " + (f"epoch {h['epoch']} seq {h['seq']} {h['digest'][:12]}" if h
                              else "none (never synced)"),
             f"  outbox: {doc['outbox']} unpublished local change(s)"]
    for c in doc["conflicts"]:
        lines.append(f"  held:   {c['entry']} (conflict in {', '.join(c['fields'])})")
    for p in doc["problems"]:
        where = f"{p['path']}:{p['line']}" if p.get("line") else p["path"]
        lines.append(f"  problem: {where}: {p['reason']}")
    for d in doc.get("policy_denied") or []:
        lines.append(f"  policy_denied: {d['id']} ({d['action']}, rule {d['rule']}): kept "
                     "locally, not published")
    if doc["last_error"]:
        e = doc["last_error"]
        lines.append(f"  last error: {e['code']}: {e['message']}")
    if doc.get("suspended"):
        lines.append(f"  suspended: {doc['suspended']['reason']}: the hub refuses this replica; "
                     "local edits and the outbox are kept and publish once access returns")
    return "\n".join(lines)


def run_sync(home: Home, space: SpaceConfig, out: Out) -> tuple[SyncReport, dict[str, Any]]:
    """One locked sync of ``space``; status is written whatever happens."""
    with space_lock(space):
        update, stop = out.progress(f"syncing {space.name}")
        rep, client, store = _replica(home, space, update)
        report = None
        try:
            from replica.rejoin import ensure_current_replica

            # a new device login since the replica was registered: register a new one
            ensure_current_replica(space, home.hub(space.hub_id), rep)  # type: ignore[arg-type]
            report = rep.sync()
        except QuireError as e:
            _write_status(space, report=None, error=e, role=rep.role)
            raise
        finally:
            stop()
            client.close()
            store.close()
        _write_status(space, report=report, error=None, role=rep.role)
    return report, status_doc(space)


# ---------------------------------------------------------------- commands


def cmd_join(args: argparse.Namespace, out: Out) -> int:
    from replica.auth import auth_for
    from replica.client import HubClient
    from replica.identity import CredentialFile
    from shared.signing import load_private, new_private_key, public_b64, save_private

    home = Home()
    url = args.url.rstrip("/")
    with HubClient(url) as anon:
        info = anon.hub_info()
    hub_id, public_key = info.get("hub_id"), info.get("public_key")
    if not isinstance(hub_id, str) or not isinstance(public_key, str):
        raise InvalidRequest("the hub did not describe itself (GET /v1/hub)")
    known = home.hub(hub_id)
    device_name = args.device or (known.device_name if known else socket.gethostname()[:100]
                                  or "device")
    hub_dir = home.hub_dir(hub_id)
    if known is not None:
        if known.public_key != public_key:
            raise LocalError("the hub's signing key differs from the one pinned at the first "
                             "join; refusing to trust it",
                             {"pinned": known.public_key, "offered": public_key})
        key = load_private(known.key_path)
    else:
        key = new_private_key()
        save_private(key, hub_dir / "device.pem")  # before redeeming: never lose the key
    creds = CredentialFile(hub_dir / "credential", hub_dir / "device.pem")
    auth = auth_for(creds.key_path, creds) if known is not None else None
    with HubClient(url, auth=auth, hub_key=public_key) as c:
        res = c.redeem(args.invite, device_name, public_b64(key))
    if res.get("access_token"):  # a new device: tokens bound to its key (docs/security.md)
        creds.save_grant(res, str(info.get("url") or url))
    hub = HubConfig(hub_id, url, public_key, info.get("key_id"), res.get("user_id"),
                    res.get("device_id"), device_name, hub_dir)
    if known is not None:
        hub.user_id, hub.device_id = known.user_id or hub.user_id, known.device_id or hub.device_id
    hub.save()
    space_info = res.get("space")
    if not space_info:
        out.doc({"hub": {"id": hub_id, "url": url}, "user_id": hub.user_id,
                 "device_id": hub.device_id, "space": None},
                f"joined hub {url} as device {device_name!r} (no space: owner enrollment)")
        return 0
    space_id = space_info["id"]
    if any(s.space_id == space_id for s in home.spaces()):
        # a new invite for a space this machine keeps (access was removed, now restored):
        # the membership is back; the next sync publishes what waited in the outbox
        out.doc({"hub": {"id": hub_id, "url": url}, "user_id": hub.user_id,
                 "device_id": hub.device_id, "space": space_info, "rejoined": True},
                f"access to {space_info['name']} restored; run 'quire sync'")
        return 0
    vault = Path(args.vault) if args.vault else Path.cwd() / space_info["name"]
    vault = vault.resolve()
    with _client(hub) as c:
        replica_id = c.register_replica(space_id, device_name)
    space = SpaceConfig(space_id, space_info["name"], hub_id, replica_id, vault,
                        space_info.get("role"), home.space_dir(space_id), hub.device_id)
    space.dir.mkdir(parents=True, exist_ok=True)
    space.save()
    out.say(f"joined space {space.name} as {space.role}; taking the first snapshot …")
    report, status = run_sync(home, space, out)
    doc = {"hub": {"id": hub_id, "url": url}, "user_id": hub.user_id,
           "device_id": hub.device_id, "space": space.to_json(), "replica_id": replica_id,
           "sync": report.to_json(), "status": status}
    out.doc(doc, f"vault written to {vault} ({len(report.to_json()['merged'])} merged, "
                 f"head seq {status['head']['seq'] if status['head'] else 0})")
    return 0


def cmd_spaces(args: argparse.Namespace, out: Out) -> int:
    home = Home()
    spaces = home.spaces()
    hubs = {h.hub_id: h.url for h in home.hubs()}
    rows = [dict(s.to_json(), hub_url=hubs.get(s.hub_id)) for s in spaces]
    human = "\n".join(f"{s.name:20} {s.space_id}  {s.role or '?':7} {s.vault}  "
                      f"({hubs.get(s.hub_id)})" for s in spaces) or "no space joined"
    out.doc({"spaces": rows}, human)
    return 0


def cmd_sync(args: argparse.Namespace, out: Out) -> int:
    home = Home()
    space = home.space(args.space)
    report, status = run_sync(home, space, out)
    r = report.to_json()
    human = [f"synced {space.name}: pulled {r['pulled']} batch(es), pushed {r['pushed']} "
             f"change(s) in {r['batches']} batch(es)" + (" (snapshot)" if r["snapshot"] else "")]
    for e in r["merged"]:
        human.append(f"  merged: {e}")
    for e in r["held"]:
        human.append(f"  held in conflict: {e} (your version stays in the vault)")
    for p in r["problems"]:
        where = f"{p['path']}:{p['line']}" if p.get("line") else p["path"]
        human.append(f"  not published: {where}: {p['reason']}")
    for d in r["policy_denied"]:
        human.append(f"  refused locally (policy_denied): {d['message']}")
    out.doc(dict(status, sync=r), "\n".join(human))
    return 0


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    from replica.status import human_watcher, watcher_status

    space = Home().space(args.space)
    doc = status_doc(space)
    doc["watcher"] = watcher_status(space)  # the watcher's own status file (watch.json)
    out.doc(doc, "\n".join([_human_status(doc), *human_watcher(doc["watcher"])]))
    return 1 if doc["state"] == "error" and args.strict else 0


def cmd_watch(args: argparse.Namespace, out: Out) -> int:
    """Keep spaces current (replica/watch.py); --install writes the systemd user unit."""
    from replica import watch

    home = Home()
    spaces = [home.space(s) for s in args.spaces] if args.spaces else home.spaces()
    if not spaces and not args.uninstall:
        home.space(None)  # raises not_joined with the usual advice
    names = [s.name for s in spaces]
    if args.install or args.uninstall:
        res = (watch.install_unit(home.root, names) if args.install
               else watch.uninstall_unit(names))
        out.doc(res, f"{'wrote' if args.install else 'removed'} {res['unit']}\n" +
                "\n".join("  " + c for c in res["commands"]))
        return 0
    return watch.run_watch(home, spaces, say=out.say)


def cmd_admin(args: argparse.Namespace, out: Out) -> int:
    from replica import identity_cli

    home = Home()
    hub = _hub_for(home, args)
    with _client(hub) as c:
        if args.noun == "space" and args.verb == "create":
            res = c.create_space(args.name)
            out.doc(res, f"created space {res['space']['name']} ({res['space']['id']})")
        elif args.noun == "space" and args.verb == "list":
            rows = c.spaces()
            out.doc({"spaces": rows}, "\n".join(
                f"{s['name']:20} {s['id']}  {s.get('role', '?'):7} seq {s.get('seq')}"
                for s in rows) or "no spaces")
        elif args.noun == "invite" and args.verb == "create":
            if args.owner:
                res = c.create_owner_invite(args.ttl)
            else:
                if not args.space or not args.role:
                    raise UsageError("give SPACE and --role, or --owner")
                res = c.create_invite(args.space, args.role, args.ttl)
            out.doc(res, f"invite code: {res['code']}\n(expires at {res.get('expires_at')}; "
                         f"join with: quire join {hub.url} --invite {res['code']})")
        elif args.noun == "epoch" and args.verb == "bump":
            res = c.bump_epoch(args.space, args.reason)
            out.doc(res, f"epoch of {args.space} is now {res.get('epoch')} "
                         f"(was {res.get('previous')})")
        elif not identity_cli.admin(args, out, c, hub):
            raise UsageError(f"unknown admin command {args.noun} {args.verb}")
    return 0


def cmd_demo(args: argparse.Namespace, out: Out) -> int:
    from replica.demo import run_demo

    return run_demo(out, keep=args.keep)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from replica import identity_cli

    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON document (errors included); non-zero exit on failure")
    p = _Parser(prog="quire", description="Quire: shared memory for teams of AI agents.",
                parents=[common])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("hub", help="run or set up a hub (quire hub --help)", add_help=False)

    j = sub.add_parser("join", parents=[common], help="join a hub (and a space) with an invite")
    j.add_argument("url", help="the hub's URL, e.g. http://127.0.0.1:8470")
    j.add_argument("--invite", required=True, metavar="CODE", help="the invite code")
    j.add_argument("--vault", metavar="DIR", help="where to keep the Markdown files "
                                                  "(default: ./<space name>)")
    j.add_argument("--device", metavar="NAME", help="this device's name (default: host name)")
    j.set_defaults(func=cmd_join)

    s = sub.add_parser("spaces", parents=[common], help="list the spaces this machine joined")
    s.set_defaults(func=cmd_spaces)

    sy = sub.add_parser("sync", parents=[common], help="scan the vault, pull, merge, push")
    sy.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    sy.set_defaults(func=cmd_sync)

    st = sub.add_parser("status", parents=[common],
                        help="head, outbox, held conflicts, problems, last error")
    st.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    st.add_argument("--strict", action="store_true", help="exit 1 when the last sync failed")
    st.set_defaults(func=cmd_status)

    w = sub.add_parser("watch", parents=[common],
                       help="keep spaces current: hub events, vault edits, backoff")
    w.add_argument("spaces", nargs="*", metavar="SPACE", help="space ids or names "
                   "(default: every joined space)")
    w.add_argument("--install", action="store_true",
                   help="write the systemd user unit for this machine")
    w.add_argument("--uninstall", action="store_true", help="remove that unit")
    w.set_defaults(func=cmd_watch)

    d = sub.add_parser("demo", parents=[common],
                       help="two replicas on an embedded hub: a clean merge and a held conflict")
    d.add_argument("--keep", action="store_true", help="keep the temporary folder")
    d.set_defaults(func=cmd_demo)

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
    inv = nouns.add_parser("invite", parents=[common], help="invites").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser)
    inv.required = True
    ic = inv.add_parser("create", parents=[common], help="a single-use invite code")
    ic.add_argument("space", nargs="?", metavar="SPACE")
    ic.add_argument("--role", choices=["viewer", "editor", "admin"])
    ic.add_argument("--owner", action="store_true", help="an owner enrollment code (no space)")
    ic.add_argument("--ttl", type=int, metavar="SECONDS", help="lifetime of the code")
    identity_cli.add_invite_verbs(inv, common)
    ep = nouns.add_parser("epoch", parents=[common], help="epochs").add_subparsers(
        dest="verb", metavar="VERB", parser_class=_Parser)
    ep.required = True
    eb = ep.add_parser("bump", parents=[common],
                       help="start a new epoch (replicas re-snapshot and replay local changes)")
    eb.add_argument("space", metavar="SPACE")
    eb.add_argument("--reason", required=True, metavar="TEXT")
    identity_cli.add_admin_parsers(nouns, common, _Parser)
    a.set_defaults(func=cmd_admin)
    identity_cli.add_parsers(sub, common, _Parser)
    for name, fn in (("delegate", identity_cli.cmd_delegate),
                     ("devices", identity_cli.cmd_devices)):
        sub.choices[name].set_defaults(func=lambda args, out, fn=fn: fn(
            args, out, _client(_hub_for(Home(), args))))
    sub.choices["login"].set_defaults(func=lambda args, out: identity_cli.cmd_login(
        args, out, Home()))

    from replica.conflicts_cli import add_parsers  # conflicts …, mcp

    add_parsers(sub, common)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "hub":
        hub_cli = importlib.import_module("hub.cli")  # lazily: the replica never imports hub
        return int(hub_cli.main(argv[1:]) or 0)
    out = Out("--json" in argv)
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args, out))
    except QuireError as e:
        if out.json:
            out.doc(error_doc(e))
        else:
            print(f"error: {e.message} [{e.code}]", file=sys.stderr)
            if e.details:
                print(f"  details: {json.dumps(e.details, ensure_ascii=False)}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except OSError as e:
        err = LocalError(f"{type(e).__name__}: {e}")
        if out.json:
            out.doc(error_doc(err))
        else:
            print(f"error: {err.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
