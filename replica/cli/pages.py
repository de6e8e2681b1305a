"""``quire log``, ``quire diff``, ``quire deleted`` and ``quire restore``: a space's changes
and one page at a time, for people (replica/app/changelog.py, replica/app/pages.py).

    quire log [ENTRY…] [--space S] [--since TIME|SEQ] [--author NAME] [--agent NAME] [-n N]
    quire diff [ENTRY…] [--space S]              what the next sync would publish
    quire diff ENTRY A..B [--space S]            between two seqs, as the hub has them
    quire deleted [--space S]                    deleted pages, who and when
    quire restore ENTRY [--at SEQ|TIME] [--space S]

Human output names people and local times, never ids; ``--json`` keeps ids and UTC
milliseconds.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from replica.machine.home import Home
from shared.errors import InvalidRequest


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    lg = sub.add_parser("log", parents=[common],
                        help="the space's changes, newest first: when, who, what")
    lg.add_argument("entries", nargs="*", metavar="ENTRY",
                    help="only these entries (an id, or a prefix ending in '/': page/)")
    lg.add_argument("--space", metavar="SPACE")
    lg.add_argument("--since", metavar="TIME|SEQ",
                    help="from a seq (12), a duration back (30m, 2h, 3d) or a local time "
                         "(2026-12-03 14:00)")
    lg.add_argument("--author", metavar="NAME", help="a member's display name ('me': you)")
    lg.add_argument("--agent", metavar="NAME", help="changes an agent made")
    lg.add_argument("-n", "--limit", type=int, default=50, metavar="N",
                    help="at most N changes (default 50)")
    lg.set_defaults(func=cmd_log)

    df = sub.add_parser("diff", parents=[common],
                        help="what the next sync would publish (ENTRY A..B: between seqs)")
    df.add_argument("args", nargs="*", metavar="ENTRY|A..B")
    df.add_argument("--space", metavar="SPACE")
    df.set_defaults(func=cmd_diff)

    de = sub.add_parser("deleted", parents=[common], help="deleted pages: who and when")
    de.add_argument("--space", metavar="SPACE")
    de.set_defaults(func=cmd_deleted)

    rs = sub.add_parser("restore", parents=[common],
                        help="bring one page back to an earlier version (or undelete it) "
                             "and publish it as your edit")
    rs.add_argument("entry", metavar="ENTRY")
    rs.add_argument("--at", metavar="SEQ|TIME",
                    help="the version right after seq N, or current at a local time "
                         "(default: the one before the last change; a deleted page: its "
                         "last content)")
    rs.add_argument("--space", metavar="SPACE")
    rs.add_argument("--no-sync", action="store_true",
                    help="only write the vault file; the next sync publishes it")
    rs.set_defaults(func=cmd_restore)


# ---------------------------------------------------------------- log


def cmd_log(args: argparse.Namespace, out: Any) -> int:
    from replica.app import changelog
    from replica.store.store import Store

    if args.limit < 1 or args.limit > 10_000:
        raise InvalidRequest("--limit is 1 to 10000")
    home = Home()
    space = home.space(args.space)
    me = changelog.me(home, space)
    store = Store(space.store_path)
    try:
        known = changelog.names(store)
        changes, more = changelog.read(space, store, entries=args.entries, since=args.since,
                                       author=args.author, agent=args.agent, names=known,
                                       me=me, limit=args.limit)
    finally:
        store.close()
    if args.author is None:
        known = changelog.names_for(home, space, changes)
    elif args.author.casefold() not in ("me", "you") and not changes:
        # a name this replica has not learned yet: ask the hub once, then read again
        store = Store(space.store_path)
        try:
            known = changelog.refresh_names(home, space, store)
            changes, more = changelog.read(space, store, entries=args.entries,
                                           since=args.since, author=args.author,
                                           agent=args.agent, names=known, me=me,
                                           limit=args.limit)
        finally:
            store.close()
    doc = {"space": space.name, "changes": [changelog.to_json(c, known, me) for c in changes],
           "more": more}
    human = [changelog.line(c, known, me) for c in changes] or ["no changes"]
    if more:
        human.append(f"… older changes: quire log -n {args.limit * 2}")
    out.doc(doc, "\n".join(human))
    return 0


# ---------------------------------------------------------------- diff


_RANGE = re.compile(r"^(\d+)\.\.(\d*)$")


def human_diff(d: dict[str, Any]) -> list[str]:
    """One page's change: a headline, the front-matter fields by name, the body's diff."""
    how = f"renamed from {d['renamed_from']}" if d.get("renamed_from") else \
        "new page" if d["created"] else "deleted" if d["deleted"] else "edited"
    lines = [f"{d['id']}: {how}"]
    for name, (a, b) in sorted(d["fields"].items()):
        if d["created"] or d["deleted"]:
            continue
        lines.append(f"  {name}: {_show(a)} -> {_show(b)}")
    if d["body"]:
        lines += [ln.rstrip("\n") for ln in d["body"].splitlines()]
    return lines


def _show(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {x}" for k, x in sorted(v.items())) + "}"
    return repr(v) if isinstance(v, str) else str(v)


def cmd_diff(args: argparse.Namespace, out: Any) -> int:
    ranged = [a for a in args.args if _RANGE.match(a)]
    if ranged:
        ids = [a for a in args.args if a not in ranged]
        if len(ranged) != 1 or len(ids) != 1:
            raise InvalidRequest("give one ENTRY and one A..B (seqs: 3..7, or 3.. for up to "
                                 "the hub's head)")
        return _diff_between(args, out, ids[0], ranged[0])
    from replica.app.pages import local_diff

    space = Home().space(args.space)
    doc = local_diff(space, args.args or None)
    human: list[str] = []
    for d in doc["entries"]:
        human += human_diff(d)
    for p in doc["problems"]:
        human.append(f"not published (fix the file): {p['path']}: {p['reason']}")
    out.doc(doc, "\n".join(human) or "nothing to publish: the vault is as synced")
    return 0


def _diff_between(args: argparse.Namespace, out: Any, entry_id: str, spec: str) -> int:
    from replica.app.remote_reads import ask

    m = _RANGE.match(spec)
    assert m is not None
    params: dict[str, Any] = {"id": entry_id, "from": int(m.group(1))}
    if m.group(2):
        params["to"] = int(m.group(2))
    doc = ask(Home(), args.space, "diff", params)
    d = {"id": entry_id, "created": doc["created"], "deleted": doc["deleted"],
         "fields": doc["fields"], "body": doc["body"]}
    head = [f"{entry_id} from seq {doc['from']['seq']} to seq {doc['to']['seq']}"]
    out.doc(doc, "\n".join(head + human_diff(d)[1:]) if (d["fields"] or d["body"] or
                                                       d["created"] or d["deleted"])
            else head[0] + ": no change")
    return 0


# ---------------------------------------------------------------- deleted, restore


def cmd_deleted(args: argparse.Namespace, out: Any) -> int:
    from replica.app import changelog
    from replica.app.pages import deleted

    home = Home()
    space = home.space(args.space)
    doc = deleted(space)
    me = changelog.me(home, space)
    known = changelog.names_for(home, space, doc["deleted"])
    human = []
    for r in doc["deleted"]:
        if r["at"] is None and r["author"] is None and not r["own"]:
            human.append(f"{r['id']}  (deleted before this replica's history)")
            continue
        who = changelog.who(r, known, me)
        moved = f", renamed to {r['renamed_to']}" if r.get("renamed_to") else ""
        human.append(f"{r['id']}  deleted by {who}, {changelog.when(r)}{moved}")
    if human:
        human.append("bring one back: quire restore ENTRY")
    out.doc(doc, "\n".join(human) or "no deleted pages")
    return 0


def cmd_restore(args: argparse.Namespace, out: Any) -> int:
    from replica.app import changelog, service
    from replica.app.pages import restore

    home = Home()
    space = home.space(args.space)
    res = restore(home, space, args.entry, at=args.at)
    v = res["from"]
    was = "deleted page " if res.get("was_deleted") else ""
    lines = [f"{args.entry}: already as it was at seq {v['seq']}; nothing to restore"
             if not res["restored"] else
             f"restored {was}{args.entry} to its version of {changelog.when(dict(at=v.get('accepted_at')))}"
             f" (seq {v['seq']})"]
    code = 0
    if res["restored"] and not args.no_sync and not res["others_pending"]:
        report, status = service.run_sync(home, space, out.progress(f"syncing {space.name}"))
        res["sync"] = report.to_json()
        me = changelog.me(home, space)
        known = changelog.names_for(home, space, report.changes)
        lines += changelog.lines(report.changes, known, me, prefix="  ")
        if args.entry in status["unpublished"]["entries"] or any(
                c["entry"] == args.entry for c in status["conflicts"]):
            lines.append(f"  not published: quire status says why ({status['state']})")
            code = 3
    elif res["restored"]:
        n = len(res["others_pending"])
        lines.append("written to the vault; 'quire sync' publishes it" +
                     (f" with your {n} other unpublished change(s) (quire diff shows them)"
                      if n else ""))
    out.doc(res, "\n".join(lines))
    return code
