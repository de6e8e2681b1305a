"""The ``quire admin revert`` front end: parse, plan or publish (replica/app/revert.py), print."""

from __future__ import annotations

import argparse
from typing import Any


def add_admin_parser(nouns: Any, common: argparse.ArgumentParser) -> None:
    rv = nouns.add_parser("revert", parents=[common],
                          help="undo one batch with a compensating batch (preview: --dry-run)")
    rv.add_argument("space", metavar="SPACE")
    rv.add_argument("seq", type=int, metavar="SEQ")
    rv.add_argument("--dry-run", action="store_true", help="show what would be restored")
    rv.add_argument("--block", action="store_true",
                    help="also block the reverted versions from being published again "
                         "(a replica still holding one keeps it as a held conflict)")
    rv.add_argument("--hub", metavar="URL")
    rv.set_defaults(verb="run")


def run(args: argparse.Namespace, out: Any, client: Any, hub: Any) -> None:
    from replica.app.revert import block, plan, revert

    p = plan(client, args.space, args.seq)
    doc = dict(p.to_json(), dry_run=bool(args.dry_run), receipt=None, blocked=None)
    lines = [f"revert of seq {p.seq} in {args.space}:"]
    lines += [f"  {r['action']:8} {r['id']}" for r in p.restored]
    lines += [f"  conflict {c['id']} (changed since, at seq {c['changed_seq']}; left as is)"
              for c in p.conflicts]
    lines += [f"  same     {u} (already as before)" for u in p.unchanged]
    if args.block and not args.dry_run and p.ops and p.reverted_versions():
        # blocking is for space admins: asked first (a dry run of the block, every check
        # on the hub), so a refused block leaves nothing published either
        block(client, args.space, p, dry_run=True)
    if not args.dry_run:
        from shared.signing import load_private

        doc["receipt"] = revert(client, load_private(hub.key_path), args.space, p)
        lines.append(f"published as seq {doc['receipt']['seq']}")
    if args.block and p.reverted_versions():
        # after the revert: the entries no longer hold these versions, so blocking them
        # refuses only their return (hub/blocks.py)
        doc["blocked"] = block(client, args.space, p, dry_run=bool(args.dry_run))
        verb = "would block" if args.dry_run else "blocked"
        lines += [f"  {verb:11} {b['id']} version {b['version'][:12]}…"
                  for b in doc["blocked"]]
    if args.dry_run:
        lines.append("dry run: nothing published, nothing blocked")
    out.doc(doc, "\n".join(lines))
