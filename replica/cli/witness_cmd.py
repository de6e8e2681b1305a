"""``quire witness …`` (docs/cli.md, "Witness"; docs/security.md, "The log and its
witnesses"), one subcommand of the main parser with two kinds of verbs:

    list|add|remove SPACE …   a hub owner sets the witnesses of a space and how many must
                              co-sign: the whole new policy sent to ``POST …/witnesses``,
                              which the hub signs, logs and audits
    serve|key|forget --data DIR …
                              the witness service itself (hub/witness/cli.py, reached by
                              name only: the replica never imports the hub)
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

VERBS = ("list", "add", "remove")
SERVICE = {"serve": "serve the witness",
           "key": "print its name and public key (what owners add)",
           "forget": "forget one log's line (after its hub lost data or showed two "
                     "histories)"}


def add_parsers(sub: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    wp = sub.add_parser("witness", parents=[common],
                        help="witnesses of a space's log: a space's policy, or the service")
    verbs = wp.add_subparsers(dest="verb", metavar="VERB", parser_class=parser_class)
    verbs.required = True
    for verb in VERBS:
        sp = verbs.add_parser(verb, parents=[common],
                              help={"list": "the space's witness policy",
                                    "add": "add a witness (hub owners)",
                                    "remove": "remove a witness (hub owners)"}[verb])
        sp.add_argument("space", help="the space (name or id)")
        if verb == "add":
            sp.add_argument("name", help="the witness's name (quire witness key prints it)")
            sp.add_argument("key", help="its public key (quire witness key prints it)")
            sp.add_argument("url", help="where replicas reach it, e.g. https://w.example")
        if verb == "remove":
            sp.add_argument("name")
        if verb != "list":
            sp.add_argument("--quorum", type=int, default=None,
                            help="how many must co-sign (default: as now, at most the count)")
            sp.add_argument("--reason", default="", help="recorded in the audit log")
        sp.add_argument("--hub", default=None)
        sp.set_defaults(func=cmd_policy)
    for verb, help_ in SERVICE.items():
        sp = verbs.add_parser(verb, parents=[common], help=help_)
        sp.add_argument("--data", required=True, help="the witness's folder (key, SQLite)")
        sp.add_argument("--name", default=None,
                        help="its name in co-signatures (default quire-witness/<key id>)")
        if verb == "serve":
            sp.add_argument("--host", default="127.0.0.1")
            sp.add_argument("--port", type=int, default=8788)
            sp.add_argument("--hub", action="append", default=[],
                            help="serve only this hub key (repeat; default: any)")
        if verb == "forget":
            sp.add_argument("origin", help="the log's origin (quire.log/<hub key>/<space>)")
        sp.set_defaults(func=cmd_service)


def cmd_service(args: argparse.Namespace, out: Any) -> int:
    """serve|key|forget: the service's own module (a service of its own, hub/witness/)."""
    return int(importlib.import_module("hub.witness.cli").run(args))


def _current(c: Any, space: str) -> dict[str, Any] | None:
    policies = (c.admin_get(f"/v1/spaces/{space}/witnesses") or {}).get("policies") or []
    return policies[-1] if policies else None


def cmd_policy(args: argparse.Namespace, out: Any) -> int:
    from replica.app.service import hub_for, open_client
    from replica.machine.home import Home

    with open_client(hub_for(Home(), args.hub)) as c:
        cur = _current(c, args.space)
        if args.verb == "list":
            doc: dict[str, Any] = {"policy": cur}
            human = "no witnesses" if cur is None else "\n".join(
                [f"quorum {cur['quorum']} of {len(cur['witnesses'])}"]
                + [f"  {w['name']}  {w['url']}" for w in cur["witnesses"]])
        else:
            ws = [] if cur is None else list(cur["witnesses"])
            ws = [w for w in ws if w["name"] != args.name]
            if args.verb == "add":
                ws.append({"name": args.name, "key": args.key, "url": args.url})
            quorum = args.quorum if args.quorum is not None else min(
                0 if cur is None else int(cur["quorum"]), len(ws))
            doc = c.admin_post(f"/v1/spaces/{args.space}/witnesses", {
                "quorum": quorum, "witnesses": ws, "reason": args.reason})
            human = f"witnesses set: quorum {quorum} of {len(ws)}"
    out.doc(doc, human)
    return 0
