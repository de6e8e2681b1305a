"""``quire links fix OLD NEW [--space S] [--dry-run]``: the links to a renamed page rewritten
to its new name in every vault file that has them (replica/app/backlinks.py); the next
``quire sync`` publishes them. This module only parses and prints."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    lk = sub.add_parser("links", parents=[common], help="links between pages: fix them")
    verbs = lk.add_subparsers(dest="verb", metavar="VERB", parser_class=type(lk))
    verbs.required = True
    fx = verbs.add_parser("fix", parents=[common],
                          help="rewrite the links to OLD (a page renamed or about to be) to "
                               "name NEW, in every page of the vault that has them")
    fx.add_argument("old", metavar="OLD", help="the page's old id (path without .md)")
    fx.add_argument("new", metavar="NEW", help="its new id")
    fx.add_argument("--space", metavar="SPACE")
    fx.add_argument("--dry-run", action="store_true", help="list the pages, change nothing")
    fx.set_defaults(func=cmd_fix)


def cmd_fix(args: argparse.Namespace, out: Any) -> int:
    from replica.app.backlinks import fix
    from replica.machine.home import Home
    from replica.store.store import Store
    from shared.errors import InvalidRequest
    from shared.ids import entry_id_problem

    for name in (args.old, args.new):
        problem = entry_id_problem(name)
        if problem:
            raise InvalidRequest(f"{name!r} is not a page id: {problem}",
                                 {"reason": "invalid_entry_id", "id": name})
    space = Home().space(args.space)
    store = Store(space.store_path)
    try:
        doc = fix(space, store, args.old, args.new, dry_run=args.dry_run)
    finally:
        store.close()
    verb = "would rewrite" if args.dry_run else "rewrote"
    lines = [f"{verb} {sum(p['links'] for p in doc['pages'])} link(s) to {args.old} in "
             f"{len(doc['pages'])} page(s)"]
    lines += [f"  {p['id']} ({p['links']})" for p in doc["pages"]]
    lines += [f"  not changed: {s['id']}: {s['reason']}" for s in doc["skipped"]]
    if doc["next"]:
        lines.append("next: quire sync (publishes them)")
    out.doc(doc, "\n".join(lines))
    return 0
