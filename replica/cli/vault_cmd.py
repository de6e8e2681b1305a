"""``quire vault …``: the vault folder itself. ``quire vault rebuild [SPACE] [--set-aside]``
writes a lost or damaged vault again from the store (replica/app/rebuild.py); this module
only parses and prints."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    v = sub.add_parser("vault", parents=[common], help="the vault folder: rebuild it")
    verbs = v.add_subparsers(dest="verb", metavar="VERB", parser_class=type(v))
    verbs.required = True
    rb = verbs.add_parser("rebuild", parents=[common],
                          help="write a lost or damaged vault again from the store, byte for "
                               "byte; never over a file that differs (your edit)")
    rb.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    rb.add_argument("--set-aside", action="store_true",
                    help="move files that differ into a hidden folder of the vault "
                         "(.quire-set-aside-TIME) and write the store's version")
    rb.set_defaults(func=cmd_rebuild)


def cmd_rebuild(args: argparse.Namespace, out: Any) -> int:
    from replica.app import rebuild
    from replica.cli import exitcodes
    from replica.machine.home import Home

    doc = rebuild.rebuild(Home().space(args.space), set_aside=args.set_aside)
    out.doc(doc, rebuild.human(doc))
    return exitcodes.ATTENTION if doc["kept"]["count"] else exitcodes.OK
