"""The ``quire admin purge`` front end: parse, call the hub (hub/purge.py), print."""

from __future__ import annotations

import argparse
from typing import Any


def add_admin_parser(nouns: Any, common: argparse.ArgumentParser) -> None:
    pg = nouns.add_parser("purge", parents=[common],
                          help="remove entries' content from all history (new epoch)")
    pg.add_argument("space", metavar="SPACE")
    pg.add_argument("entries", nargs="+", metavar="ENTRY")
    pg.add_argument("--reason", required=True, metavar="TEXT",
                    help="why (signed into the new epoch's statement, audited)")
    pg.add_argument("--dry-run", action="store_true",
                    help="show the entries, batches and replicas it would touch; change "
                         "nothing")
    pg.set_defaults(verb="run")


def text(space: str, res: dict[str, Any]) -> str:
    """What a purge did (or would do), for people."""
    lines = [("would purge" if res["dry_run"] else "purged") + f" from {space}:"]
    lines += [f"  {e['id']}" + ("" if e["live"] else " (deleted, in history only)")
              for e in res["entries"]]
    lines.append(f"  batches touched: {res['batches_touched']}")
    reps = res["replicas_affected"]
    lines.append(f"  replicas affected ({len(reps)}): "
                 + (", ".join(f"{r['name']} ({r['device_name']})" for r in reps) or "none"))
    if res["dry_run"]:
        lines.append("dry run: nothing changed")
    else:
        lines.append(f"new epoch {res['epoch']} (was {res['previous']}); each replica drops "
                     "the entries on its next sync")
    return "\n".join(lines)


def run(args: argparse.Namespace, out: Any, client: Any) -> None:
    res = client.purge(args.space, list(args.entries), args.reason, bool(args.dry_run))
    out.doc(res, text(args.space, res))
