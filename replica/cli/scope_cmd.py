"""``quire scope show|add|remove|set`` (docs/cli.md): which entries a replica holds, a partial
replica's globs changed and the vault brought to them by a sync (replica/app/scope.py);
this module only parses and prints."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    sc = sub.add_parser("scope", parents=[common],
                        help="which entries this replica holds: show, add, remove, set "
                             "(a partial replica)")
    verbs = sc.add_subparsers(dest="verb", metavar="VERB", parser_class=type(sc))
    verbs.required = True
    sh = verbs.add_parser("show", parents=[common],
                          help="the globs this replica holds and your read rules")
    sh.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    sh.set_defaults(func=cmd_scope)
    for verb, help_ in (("add", "hold these entries too (then sync: what is new comes in)"),
                        ("remove", "stop holding these (then sync: their files go; an "
                                   "unpublished edit is held, never lost)"),
                        ("set", "hold exactly these (--all: everything you may read)")):
        p = verbs.add_parser(verb, parents=[common], help=help_)
        p.add_argument("patterns", nargs="*" if verb == "set" else "+", metavar="PATTERN",
                       help="a glob of entry ids, e.g. 'projects/alpha/*' ('*' crosses "
                            "folders)")
        p.add_argument("--space", metavar="SPACE", help="space id or name (default: the "
                                                       "only one joined)")
        if verb == "set":
            p.add_argument("--all", action="store_true",
                           help="hold everything you may read (no globs)")
        p.set_defaults(func=cmd_scope)


def cmd_scope(args: argparse.Namespace, out: Any) -> int:
    from replica.app import scope, service
    from replica.machine.home import Home
    from shared.errors import InvalidRequest

    home = Home()
    space = home.space(args.space)
    if args.verb != "show":
        if args.verb == "set" and bool(args.all) == bool(args.patterns):
            raise InvalidRequest("give PATTERN… or --all")
        only = () if getattr(args, "all", False) else scope.changed(
            scope.current(space), args.verb, list(args.patterns))
        scope.set_only(space, only)
        report, _status = service.run_sync(home, space, out.progress(f"syncing {space.name}"))
    doc = scope.show(space)
    human = scope.human(doc)
    if args.verb != "show":
        r = report.to_json()
        doc["sync"] = r
        gone = [d for d in r["left_scope"]]
        human += (f"\nsynced: {r['pulled']} batch(es) pulled"
                  + (" (snapshot)" if r["snapshot"] else "")
                  + (f", {len(gone)} entr(ies) left the scope" if gone else ""))
        for d in gone:
            if d["held"]:
                human += f"\n  held, your unpublished edit kept: {d['id']}"
    out.doc(doc, human)
    return 0
