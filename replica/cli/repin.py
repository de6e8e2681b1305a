"""``quire repin URL --hub-key KEY_ID``: trust a hub key by hand when no rotation statement
chains to it (the hub's old key was lost; docs/operations.md). The service does the work
(``replica.app.service.repin``); this module parses and prints."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    rp = sub.add_parser("repin", parents=[common],
                        help="trust the hub's new key by hand (its old key was lost)",
                        description="Pin the key the hub at URL signs with now, when no "
                                    "rotation statement chains to it from the pinned one "
                                    "(sync says hub_key_unchained). Check KEY_ID with the "
                                    "hub's admin ('quire hub record' on the hub) first.")
    rp.add_argument("url", help="the hub's URL")
    rp.add_argument("--hub-key", required=True, metavar="KEY_ID",
                    help="the new key's id (or whole public key), as the hub's admin read it")
    rp.set_defaults(func=cmd_repin)


def cmd_repin(args: argparse.Namespace, out: Any) -> int:
    from replica.app.service import repin
    from replica.machine.home import Home

    doc = repin(Home(), args.url, args.hub_key)
    out.doc(doc, f"pinned hub key {doc['key_id']} for {doc['hub']['url']} (was "
                 f"{doc['previous']}); run 'quire sync'" if doc["changed"] else
                 f"hub key {doc['key_id']} was already pinned")
    return 0
