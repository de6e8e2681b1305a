"""The ``quire admin revert`` front end: parse, plan or publish (replica/revert.py), print."""

from __future__ import annotations

import argparse
from typing import Any


def add_admin_parser(nouns: Any, common: argparse.ArgumentParser) -> None:
    rv = nouns.add_parser("revert", parents=[common],
                          help="undo one batch with a compensating batch (preview: --dry-run)")
    rv.add_argument("space", metavar="SPACE")
    rv.add_argument("seq", type=int, metavar="SEQ")
    rv.add_argument("--dry-run", action="store_true", help="show what would be restored")
    rv.add_argument("--hub", metavar="URL")
    rv.set_defaults(verb="run")


def run(args: argparse.Namespace, out: Any, client: Any, hub: Any) -> None:
    from replica.revert import plan, revert

    p = plan(client, args.space, args.seq)
    doc = dict(p.to_json(), dry_run=bool(args.dry_run), receipt=None)
    lines = [f"revert of seq {p.seq} in {args.space}:"]
    lines += [f"  {r['action']:8} {r['id']}" for r in p.restored]
    lines += [f"  conflict {c['id']} (changed since, at seq {c['changed_seq']}; left as is)"
              for c in p.conflicts]
    lines += [f"  same     {u} (already as before)" for u in p.unchanged]
    if not args.dry_run:
        from shared.signing import load_private

        doc["receipt"] = revert(client, load_private(hub.key_path), args.space, p)
        lines.append(f"published as seq {doc['receipt']['seq']}")
    else:
        lines.append("dry run: nothing published")
    out.doc(doc, "\n".join(lines))
