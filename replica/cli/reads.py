"""``quire read`` and ``quire search``: read a space at the hub, without touching the replica.

    quire read ENTRY_ID --remote [--space S] [--seq N] [--history] [--diff FROM[:TO]]
    quire search WORDS… --remote [--space S] [--limit N]

Both ask the hub's remote read API (docs/protocol.md "Remote reads") with this device's
credential (or an agent's delegation), so they see exactly what a pull would, at the head
the answer names. Without ``--remote`` they read the local replica: the vault file, and the
same every-word match over the entries in the local store.
"""

from __future__ import annotations

import argparse
from typing import Any

from replica.machine.home import Home
from shared.errors import InvalidRequest


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    rd = sub.add_parser("read", parents=[common],
                        help="print an entry (--remote: as the hub has it, at a seq, history)")
    rd.add_argument("entry", metavar="ENTRY_ID")
    rd.add_argument("--space", metavar="SPACE")
    rd.add_argument("--remote", action="store_true", help="ask the hub, not the replica")
    rd.add_argument("--seq", type=int, metavar="N", help="as it was right after batch N")
    rd.add_argument("--history", action="store_true", help="its changes, newest first")
    rd.add_argument("--diff", metavar="FROM[:TO]", help="what changed between two seqs")
    rd.add_argument("--backlinks", action="store_true",
                    help="the pages that link to it (local: the replica's links index)")
    rd.set_defaults(func=cmd_read)
    se = sub.add_parser("search", parents=[common],
                        help="entries holding every word (--remote: at the hub's head)")
    se.add_argument("words", nargs="+", metavar="WORD")
    se.add_argument("--space", metavar="SPACE")
    se.add_argument("--remote", action="store_true", help="ask the hub, not the replica")
    se.add_argument("--limit", type=int, default=20, metavar="N")
    se.set_defaults(func=cmd_search)


def _head(doc: dict[str, Any]) -> str:
    return f"(at seq {doc['head']['seq']})"


def cmd_read(args: argparse.Namespace, out: Any) -> int:
    if not args.remote:
        return _read_local(args, out)

    from replica.app.remote_reads import ask as ask_hub

    def ask(what: str, params: dict[str, Any]) -> dict[str, Any]:
        return ask_hub(Home(), args.space, what, params)

    if args.backlinks:
        doc = ask("backlinks", {"id": args.entry})
        out.doc(doc, _backlink_lines(args.entry, doc["backlinks"]) + f" {_head(doc)}")
    elif args.history:
        doc = ask("history", {"id": args.entry})
        lines = [] if out.json else _history_lines(doc, ask)
        out.doc(doc, "\n".join([f"{args.entry} {_head(doc)}", *lines]))
    elif args.diff:
        a, _, b = args.diff.partition(":")
        try:
            params = {"id": args.entry, "from": int(a), **({"to": int(b)} if b else {})}
        except ValueError as e:
            raise InvalidRequest("--diff takes FROM or FROM:TO (seqs)") from e
        doc = ask("diff", params)
        fields = [f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in doc["fields"].items()]
        out.doc(doc, "\n".join([*fields, doc["body"]]).rstrip() or "no change")
    else:
        params = {"id": args.entry, **({"seq": args.seq} if args.seq is not None else {})}
        doc = ask("entry", params)
        entry = doc["entry"]
        out.doc(doc, f"# {entry.get('title') or args.entry}  {_head(doc)}\n\n"
                     f"{entry.get('body', '')}")
    return 0


def _history_lines(doc: dict[str, Any], ask: Any) -> list[str]:
    """One line per version, newest first: seq, local time, the member's display name
    (the hub's ``people``; "a member" when it does not know them) and the agent, and the
    page's names across a rename; no ids."""
    from shared.errors import QuireError
    from shared.humanize import stamp

    try:
        names = {p["user_id"]: p["name"] for p in ask("people", {}).get("people") or []}
    except QuireError:
        names = {}
    lines = []
    for v in doc["versions"]:
        a = v.get("author") or {}
        who = names.get(a.get("user") or "") or "a member"
        if a.get("agent"):
            who += f" for agent {a['agent']}"
        at = stamp(v["accepted_at"]) if isinstance(v.get("accepted_at"), int) else ""
        # a rename is followed (docs/protocol.md, "Renames"): older versions are the old name's
        name = f"  as {v['id']}" if v.get("id", doc["id"]) != doc["id"] else ""
        moved = f"  renamed from {v['from']}" if v.get("from") else ""
        lines.append(f"{v['seq']:>6}  {at}  {'deleted' if v['deleted'] else 'version'} "
                     f"{'' if v['deleted'] else v['version'][:12]}  {who}{moved}{name}"
                     .rstrip())
    return lines


def cmd_search(args: argparse.Namespace, out: Any) -> int:
    q = " ".join(args.words)
    if not args.remote:
        return _search_local(args, out, q)
    from replica.app.remote_reads import ask

    doc = ask(Home(), args.space, "search", {"q": q, "limit": args.limit})
    lines = [f"{r['id']:40} {r['title']}" for r in doc["results"]]
    out.doc(doc, "\n".join([f"{doc['total']} found {_head(doc)}", *lines]))
    return 0


# ---------------------------------------------------------------- local


def _backlink_lines(entry_id: str, found: list[dict[str, Any]]) -> str:
    if not found:
        return f"no page links to {entry_id}"
    return "\n".join([f"{len(found)} page(s) link to {entry_id}:",
                      *(f"  {b['id']}" + (f"  {b['title']}" if b.get("title") else "")
                        for b in found)])


def _read_local(args: argparse.Namespace, out: Any) -> int:
    if args.seq is not None or args.history or args.diff:
        raise InvalidRequest("--seq, --history and --diff ask the hub: add --remote")
    if args.backlinks:
        from replica.app.backlinks import backlinks
        from replica.store.store import Store

        space = Home().space(args.space)
        store = Store(space.store_path)
        try:
            found = backlinks(store, args.entry)
        finally:
            store.close()
        out.doc({"id": args.entry, "backlinks": found, "local": True},
                _backlink_lines(args.entry, found))
        return 0
    from replica.vault.markdown import entry_path

    space = Home().space(args.space)
    path = entry_path(space.vault, args.entry)
    if not path.exists():
        from replica.app.service import fetch_attachment

        # an attachment: its file (fetched first when this replica keeps it on the hub)
        attached = fetch_attachment(Home(), space, args.entry)
        if attached is not None and attached.exists():
            return _read_attachment(args.entry, attached, out)
        from shared.errors import NotFound
        raise NotFound(f"no file for {args.entry} in {space.vault}", {"where": "local"})
    text = path.read_text("utf-8")
    out.doc({"id": args.entry, "path": str(path), "text": text}, text.rstrip("\n"))
    return 0


def _read_attachment(entry_id: str, path: Any, out: Any) -> int:
    """An attachment is read as where its file is and what it holds, never as bytes on a
    terminal."""
    from shared.attachments import blob_hash, media_type_of

    data = path.read_bytes()
    doc = {"id": entry_id, "path": str(path), "size": len(data), "sha256": blob_hash(data),
           "media_type": media_type_of(entry_id)}
    out.doc(doc, f"{path}  ({len(data):,} bytes, {doc['media_type']})")
    return 0


def _search_local(args: argparse.Namespace, out: Any, q: str) -> int:
    from replica.store.store import Store
    from shared.search import entry_matches, search_terms

    space = Home().space(args.space)
    terms = search_terms(q)
    store = Store(space.store_path)
    try:
        states = store.states()
    finally:
        store.close()
    live = [s.local.to_dict() for s in states.values()
            if s.local is not None and not s.local.deleted]
    hits = [e for e in live if entry_matches(e, terms)]
    hits.sort(key=lambda e: e["id"])
    results = [{"id": e["id"], "title": e.get("title", "")} for e in hits[:args.limit]]
    doc = {"terms": terms, "total": len(hits), "results": results, "local": True}
    out.doc(doc, "\n".join([f"{len(hits)} found in the local replica",
                            *(f"{r['id']:40} {r['title']}" for r in results)]))
    return 0

