"""``quire admin screening allow|list``: an admin allows a screening finding for one entry
version (hub/screening.py; docs/security.md, Screening), or lists a space's allows."""

from __future__ import annotations

import argparse
from typing import Any


def add_admin_parser(nouns: Any, common: argparse.ArgumentParser, parser_class: Any) -> None:
    sc = nouns.add_parser("screening", parents=[common],
                          help="allow a content screening finding for one entry version")
    verbs = sc.add_subparsers(dest="verb", metavar="VERB", parser_class=parser_class)
    verbs.required = True
    al = verbs.add_parser(
        "allow", parents=[common], help="let one entry version publish despite a finding",
        description="Allow a finding content screening reported (content_screened) for "
                    "exactly one entry version; another version, even with the same text, "
                    "is screened again. Audited (screening.allow).")
    al.add_argument("space", metavar="SPACE")
    al.add_argument("entry", metavar="ENTRY", help="the entry id, e.g. page/deploy")
    al.add_argument("version", metavar="VERSION",
                    help="the entry version the finding names (64 hex digits)")
    al.add_argument("rule", nargs="?", default="*", metavar="RULE",
                    help="a rule name or a finding's fingerprint (default *: every finding "
                         "of that version)")
    ls = verbs.add_parser("list", parents=[common], help="a space's allowed findings")
    ls.add_argument("space", metavar="SPACE")
    ls.add_argument("--entry", metavar="ENTRY", help="only this entry's")


def run(args: argparse.Namespace, out: Any, client: Any) -> None:
    if args.verb == "allow":
        res = client.screening_allow(args.space, args.entry, args.version, args.rule)
        a = res["allow"]
        out.doc(res, f"allowed {a['rule']} in {a['entry']} at version {a['version'][:12]}"
                     + ("" if res.get("created") else " (already allowed)")
                     + "\nnext: the author syncs again (quire sync)")
        return
    rows = client.screening_allows(args.space, args.entry)
    from replica.cli.humanout import table

    out.doc({"allows": rows}, None if out.json else table(
        ["entry", "version", "rule", "by"],
        [[r["entry"], r["version"][:12], r["rule"], r["created_by"]] for r in rows],
        empty="no allowed findings"))
