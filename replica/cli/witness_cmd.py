"""``quire witness list|add|remove SPACE …``: a hub owner sets the witnesses of a space and
how many must co-sign (docs/cli.md, "Witness"; docs/security.md, "The log and its
witnesses"). Each change is the whole new policy sent to ``POST …/witnesses``, which the
hub signs, logs and audits. ``quire witness serve|key|forget`` is the service itself
(hub/witness/cli.py); replica/cli/entry.py sends each verb to its module."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from replica.app.service import hub_for, open_client
from replica.machine.home import Home
from shared.errors import QuireError

VERBS = ("list", "add", "remove")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quire witness", description="A space's witnesses.")
    sub = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for verb in VERBS:
        sp = sub.add_parser(verb, help={"list": "the space's witness policy",
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
        sp.add_argument("--json", action="store_true")
    return p


def _current(c: Any, space: str) -> dict[str, Any] | None:
    policies = (c.admin_get(f"/v1/spaces/{space}/witnesses") or {}).get("policies") or []
    return policies[-1] if policies else None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        with open_client(hub_for(Home(), args.hub)) as c:
            cur = _current(c, args.space)
            if args.verb == "list":
                doc = {"policy": cur}
                human = "no witnesses" if cur is None else "\n".join(
                    [f"quorum {cur['quorum']} of {len(cur['witnesses'])}"]
                    + [f"  {w['name']}  {w['url']}" for w in cur["witnesses"]])
            else:
                ws = [] if cur is None else list(cur["witnesses"])
                if args.verb == "add":
                    ws = [w for w in ws if w["name"] != args.name]
                    ws.append({"name": args.name, "key": args.key, "url": args.url})
                else:
                    ws = [w for w in ws if w["name"] != args.name]
                quorum = args.quorum if args.quorum is not None else min(
                    0 if cur is None else int(cur["quorum"]), len(ws))
                doc = c.admin_post(f"/v1/spaces/{args.space}/witnesses", {
                    "quorum": quorum, "witnesses": ws, "reason": args.reason})
                human = f"witnesses set: quorum {quorum} of {len(ws)}"
    except QuireError as e:
        print(json.dumps(e.to_wire()) if args.json else f"error: {e.message}",
              file=sys.stdout if args.json else sys.stderr)
        return 1
    print(json.dumps(doc) if args.json else human)
    return 0
