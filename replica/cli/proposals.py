"""``quire proposals [list|show ID|accept ID|reject ID --reason TEXT]``: what agents
proposed in a space (docs/cli.md; replica/app/proposals.py builds the requests, the hub
decides). Human output shows names and local times; ids only with ``--json``."""

from __future__ import annotations

import argparse
from typing import Any

STATES = ("open", "accepted", "rejected", "withdrawn", "stale", "all")


def add_parser(sub: Any, common: argparse.ArgumentParser, parser_class: Any) -> None:
    p = sub.add_parser("proposals", parents=[common],
                       help="changes agents proposed: list, show, accept, reject",
                       description="Changes agents proposed because their rules refuse "
                                   "them (e.g. lowering a guardrail). A member who may make "
                                   "the change accepts it (published at once, with the agent "
                                   "and you in the audit) or rejects it.")
    p.add_argument("--space", metavar="SPACE", help="space id or name (default: the only "
                                                   "joined one)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=parser_class)
    ls = verbs.add_parser("list", parents=[common], help="proposals, newest first")
    ls.add_argument("--state", choices=STATES, default="open")
    ls.add_argument("--space", metavar="SPACE", default=argparse.SUPPRESS,
                    help="space id or name")
    for verb, text in (("show", "one proposal and its diff against the entry now"),
                       ("accept", "publish it now, as you"),
                       ("reject", "refuse it, with a reason")):
        v = verbs.add_parser(verb, parents=[common], help=text)
        v.add_argument("id", metavar="ID", help="the proposal's number in the list, or its id")
        v.add_argument("--space", metavar="SPACE", default=argparse.SUPPRESS,
                       help="space id or name")
        if verb == "reject":
            v.add_argument("--reason", metavar="TEXT", default=None)
    p.set_defaults(func=cmd_proposals, verb=None)


def _who(x: dict[str, Any]) -> str:
    return f"{x['agent']} of {x.get('user_name') or 'a former member'}"


def _resolve(client_of: Any, space_id: str, ref: str) -> str:
    """A list number (``1`` = newest open) or an id, as an id."""
    from replica.app import proposals

    if ref.isdigit() and len(ref) < 6:
        rows = proposals.ask(client_of(), space_id, "list", state="open")["proposals"]
        n = int(ref)
        if not 1 <= n <= len(rows):
            from shared.errors import InvalidRequest

            raise InvalidRequest(f"there is no open proposal number {n} (quire proposals)")
        return str(rows[n - 1]["id"])
    return ref


def cmd_proposals(args: argparse.Namespace, out: Any) -> int:
    from replica.app import proposals
    from replica.app.service import open_client
    from replica.cli import exitcodes
    from replica.cli.humanout import table
    from replica.machine.home import Home
    from shared.errors import NotJoined
    from shared.humanize import when

    home = Home()
    try:
        joined = home.space(args.space)
        space_id, space_name, hub = joined.space_id, joined.name, home.hub(joined.hub_id)
        if hub is None:
            raise NotJoined(f"space {joined.name} belongs to a hub this machine no longer "
                            "knows")
    except NotJoined:
        if args.space is None:
            raise
        # a space not cloned here (an owner's or admin's machine): the hub this machine is
        # signed in to answers for it, by name or id
        space_id, space_name, hub = args.space, args.space, home.default_hub()

    def client() -> Any:
        return open_client(hub)

    verb = args.verb or "list"
    if verb == "list":
        doc = proposals.ask(client(), space_id, "list",
                            state=getattr(args, "state", "open"))
        rows = [(i + 1, x["entry_id"], x["op"], _who(x), when(x["created_at"]),
                 x["state"] + (", you may accept" if x.get("can_accept") else ""),
                 _short(x["reason"])) for i, x in enumerate(doc["proposals"])]
        state = getattr(args, "state", "open")
        none = f"no {'' if state == 'all' else state + ' '}proposals in {space_name}"
        out.doc(doc, table(("#", "entry", "change", "by", "filed", "state", "reason"), rows,
                           empty=none))
        return exitcodes.OK
    pid = _resolve(client, space_id, args.id)
    if verb == "show":
        doc = proposals.ask(client(), space_id, "show", pid)
        x = doc["proposal"]
        decided = (f" (by {x.get('decided_by_name') or 'a former member'}, "
                   f"{when(x['decided_at'])})" if x["decided_at"] else "")
        lines = [f"{x['op']} {x['entry_id']}, proposed by {_who(x)} {when(x['created_at'])}",
                 f"state: {x['state']}{decided}"
                 + (", you may accept it" if x.get("can_accept") else ""),
                 f"reason: {x['reason']}"]
        if x.get("note"):
            lines.append(f"note: {x['note']}")
        if doc["moved"] and x["state"] == "open":
            lines.append("the entry changed since it was proposed: accepting it is refused "
                         "(it goes stale); nothing would be overwritten")
        lines += ["", *doc["diff"]]
        out.doc(doc, "\n".join(lines))
        return exitcodes.OK
    if verb == "accept":
        doc = proposals.ask(client(), space_id, "accept", pid)
        x = doc["proposal"]
        out.doc(doc, f"accepted: {x['op']} {x['entry_id']} by {_who(x)} is published "
                     f"(seq {doc['seq']}), with you and {x['agent']} in the audit")
        return exitcodes.OK
    doc = proposals.ask(client(), space_id, "reject", pid,
                        {"reason": args.reason} if args.reason else {})
    x = doc["proposal"]
    out.doc(doc, f"rejected: {x['op']} {x['entry_id']} by {_who(x)}")
    return exitcodes.OK


def _short(text: str, n: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[:n - 1] + "…"
