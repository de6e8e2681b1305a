"""``quire admin space delete|restore SPACE [--dry-run]`` (hub owners; hub/space_delete.py):
parse, ask the hub, print the impact."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote


def add_parsers(sp: Any, common: argparse.ArgumentParser) -> None:
    for verb, help_ in (("delete", "delete a space: refused from then on, purged after the "
                                   "hub's retention (owners; preview: --dry-run)"),
                        ("restore", "restore a deleted space, unchanged (owners)")):
        p = sp.add_parser(verb, parents=[common], help=help_)
        p.add_argument("space", metavar="SPACE")
        p.add_argument("--dry-run", action="store_true",
                       help="report the impact (members, replicas, entries); change nothing")


def run(args: argparse.Namespace, out: Any, client: Any) -> None:
    from shared.humanize import when

    res = client.admin_post(f"/v1/spaces/{quote(args.space, safe='')}/{args.verb}",
                            {"dry_run": bool(args.dry_run)})
    imp = res["impact"]
    verb = {"delete": "deleted", "restore": "restored"}[args.verb]
    lines = [("would be " if res["dry_run"] else "") + f"{verb}: space {res['name']} "
             f"({res['space']})",
             f"  {imp['members']} member(s), {imp['replicas']} replica(s), "
             f"{imp['entries']} entries, {imp['batches']} batches"]
    if args.verb == "delete":
        lines.append(f"  publications and pulls are refused (space_deleted); its data is "
                     f"purged {when(res['purge_after'])} unless restored "
                     f"(quire admin space restore {res['name']})")
    if res["dry_run"]:
        lines.append("dry run: nothing changed")
    out.doc(res, "\n".join(lines))
