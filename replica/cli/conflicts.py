"""``quire conflicts list|show|claim|renew|release|resolve``, ``quire mcp`` and
``quire bootstrap`` (the agent-facing commands).

Registered on the main parser by ``replica/cli/main.py``; the work is in ``replica/conflicts/desk.py``
and ``replica/mcp/server.py``. With ``--json`` every verb prints one JSON document.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from replica.app.service import open_desk
from replica.conflicts.packets import DEFAULT_TTL_S, entry_from_vault_text  # no SQLAlchemy at start
from replica.machine.home import Home
from shared.errors import InvalidRequest


def _until(ms: Any) -> str:
    from shared.humanize import when

    return when(ms)


def _human_list(rows: list[dict[str, Any]]) -> str:
    from replica.cli.humanout import table

    return table(["packet", "entry", "kind", "fields", "theirs by", "claimed by"], [
        [r["packet_id"], r["entry"], r["kind"], ", ".join(r["fields"]),
         _who(r.get("theirs_author")),
         f"{r['claim']['agent']} until {_until(r['claim']['expires_at'])}" if r["claim"]
         else ""] for r in rows], empty="no open conflict packets")


def _who(author: dict[str, Any] | None) -> str:
    """Who made a side, for people: the member's display name (``a member`` when this
    replica does not know it; never an id) and the agent that wrote it on their behalf."""
    if not author:
        return "unknown"
    name = author.get("name") or ("you" if author.get("replica") == "this replica"
                                  else "a member")
    return name + (f" for agent {author['agent']}" if author.get("agent") else "")


def _human_packet(p: dict[str, Any]) -> str:
    if "part" in p:  # a page
        return str(p["text"])
    lines = [f"packet {p['packet_id']}  entry {p['entry']}  kind {p['kind']}",
             f"digest {p['digest']}", f"conflicting: {', '.join(p['fields'])}",
             f"NOTE: {p['notice']}"]
    for side in ("base", "ours", "theirs"):
        lines.append(f"{side:6} {_side(p[side])}")
    m = p.get("merged_body")
    if m and not m["truncated"]:
        lines += ["--- merged body with conflict markers ---", m["text"]]
    elif m:
        lines.append(f"merged body: {m['size']} bytes, read with --page (pages: {p['page_count']})")
    if p.get("claim"):
        lines.append(f"claimed by {p['claim']['agent']} until "
                     f"{_until(p['claim']['expires_at'])}")
    return "\n".join(lines)


def _side(s: dict[str, Any]) -> str:
    """One side of a packet for people: its title, who made it and when (``seq``); what is
    not known is left out, never printed as ``None``."""
    from shared.humanize import stamp

    desc = "absent (deleted)" if not s["present"] else repr(s.get("title") or "")
    parts = [desc]
    if s.get("author"):
        parts.append(f"by {_who(s['author'])}")
    if isinstance(s.get("at"), int):
        parts.append(stamp(s["at"]))
    return "  ".join(parts)


def _name_authors(home: Home, space: Any, desk: Any, authors: list[dict[str, Any]]) -> None:
    """Fill in the display names this replica does not know yet, asked of the hub once
    (``GET …/people``, kept for the next time; offline: left as they are)."""
    from replica.app.changelog import refresh_names

    unknown = [a for a in authors if a and a.get("user") and not a.get("name")]
    if not unknown:
        return
    names = refresh_names(home, space, desk.store)
    for a in unknown:
        a["name"] = names.get(a["user"])


def cmd_conflicts(args: argparse.Namespace, out: Any) -> int:
    home = Home()
    space = home.space(args.space)
    with open_desk(home, space) as desk:
        if args.verb == "list":
            rows = desk.list_packets()
            _name_authors(home, space, desk, [r["theirs_author"] for r in rows])
            out.doc({"packets": rows}, _human_list(rows))
        elif args.verb == "show":
            p = desk.show(args.packet, page=args.page)
            if "part" not in p:
                _name_authors(home, space, desk, [p[s]["author"] for s in
                                                  ("base", "ours", "theirs")])
            out.doc(p, _human_packet(p))
        elif args.verb == "claim":
            c = desk.claim(args.packet, args.agent, args.ttl)
            out.doc(c, f"claimed {c['packet_id']} as {c['agent']} until "
                       f"{_until(c['expires_at'])}\n"
                       f"token: {c['token']}")
        elif args.verb == "renew":
            c = desk.renew(args.packet, args.claim, args.ttl)
            out.doc(c, f"renewed {c['packet_id']} until {_until(c['expires_at'])}")
        elif args.verb == "release":
            r = desk.release(args.packet, args.claim)
            out.doc(r, f"released {r['packet_id']}")
        elif args.verb == "resolve":
            how, merged = _how(args)
            if merged is not None:
                c = desk.show(args.packet)
                merged = entry_from_vault_text(c["entry"], merged)
            r = desk.resolve(args.packet, digest=args.digest, how=how, token=args.claim,
                             merged=merged, agent=args.agent or os.environ.get("QUIRE_AGENT"))
    if args.verb == "resolve":  # the desk is closed: the sync opens the store itself
        return _publish(home, space, args, r, out)
    return 0


RESOLVED = {"ours": "kept yours", "theirs": "took theirs", "merged": "took your merged file",
            "delete": "deleted it", "keep_both": "kept both"}


def _publish(home: Home, space: Any, args: argparse.Namespace, r: dict[str, Any],
             out: Any) -> int:
    """Publish a resolution at once (one ``quire sync``), unless ``--no-sync`` or nothing
    is to publish; when it cannot go out now, say exactly what is pending and the command
    that publishes it. Exit 0 when published (or nothing to publish), 3 when it waits, the
    sync's own code when the hub could not be reached or refused (docs/cli.md)."""
    from replica.cli import exitcodes
    from shared.errors import LockHeld, QuireError

    entry = r["entry"]
    head = f"resolved {entry}: {RESOLVED.get(r['resolved'], r['resolved'])}"
    later = f"quire sync --space {space.name}"
    if not r["publish"].startswith("on the next sync"):
        r["published"] = False
        out.doc(r, f"{head}; {r['publish']}")
        return exitcodes.OK
    if args.no_sync:
        r.update(published=False, publish=f"pending: publish it with: {later}")
        out.doc(r, f"{head}; pending, not published yet: publish it with: {later}")
        return exitcodes.OK
    from replica.app import changelog, service

    try:
        report, status = service.run_sync(home, space, out.progress(f"syncing {space.name}"))
    except LockHeld:
        r.update(published=False, publish=f"pending: publish it with: {later}")
        out.doc(r, f"{head}; pending: another sync of {space.name} is running now (a "
                   f"watcher?); your resolution is kept and goes out with the next sync: "
                   f"{later}")
        return exitcodes.ATTENTION
    except QuireError as e:
        code = exitcodes.for_error_code(e.code, e.details)
        r.update(published=False, publish=f"pending: publish it with: {later}",
                 error={"code": e.code, "message": e.message})
        out.doc(r, f"{head}; pending, not published: {e.message}\nyour resolution is kept "
                   f"here; publish it with: {later}")
        return code
    r["sync"] = report.to_json()
    lines = changelog.lines(report.changes, changelog.names_for(home, space, report.changes),
                            changelog.me(home, space), prefix="  ")
    waiting = entry in status["unpublished"]["entries"] or any(
        c["entry"] == entry for c in status["conflicts"])
    r["published"] = not waiting
    if waiting:
        r["publish"] = f"pending ({status['state']}): quire status says why"
        out.doc(r, "\n".join([f"{head}; not published: quire status says why "
                               f"({status['state']})", *lines]))
        return exitcodes.ATTENTION
    r["publish"] = "published"
    out.doc(r, "\n".join([f"{head}; published", *lines]))
    return exitcodes.OK


def _how(args: argparse.Namespace) -> tuple[str, Any]:
    chosen = [x for x in (args.take, args.file, args.delete or None, args.keep_both or None)
              if x]
    if len(chosen) != 1:
        raise InvalidRequest("choose exactly one of --take ours|theirs, --file, --delete, "
                             "--keep-both")
    if args.take:
        return args.take, None
    if args.file:
        try:
            return "merged", Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidRequest(f"cannot read {args.file}: {e}") from None
    return ("delete", None) if args.delete else ("keep_both", None)


def cmd_mcp(args: argparse.Namespace, out: Any) -> int:
    from replica.app.agent_grant import DEFAULT_TTL_S as DEFAULT_GRANT_TTL_S
    from replica.cli.identity import parse_ttl
    from replica.mcp.server import serve

    ttl = parse_ttl(args.ttl) if args.ttl else DEFAULT_GRANT_TTL_S
    serve(space=args.space, agent=args.agent, write=args.write, ttl_s=ttl, model=args.model)
    return 0


def cmd_bootstrap(args: argparse.Namespace, out: Any) -> int:
    import json

    from replica.app.bootstrap import world_model

    runtime: dict[str, Any] = {}
    if args.runtime:
        try:
            runtime = json.loads(Path(args.runtime).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InvalidRequest(f"cannot read {args.runtime}: {e}") from None
        if not isinstance(runtime, dict):
            raise InvalidRequest("the runtime file holds {\"skills\": [...], "
                                 "\"guardrails\": [...]}")
    doc = world_model(Home(), args.space, persona=args.persona,
                      runtime_skills=runtime.get("skills"),
                      runtime_guardrails=runtime.get("guardrails"),
                      max_bytes=args.max_bytes)
    human = [f"space {doc['space']['name']}  version seq {doc['version']['seq']} "
             f"{doc['version']['digest'][:12]}"]
    human += [f"guardrail [{g['severity']}] {g['key']}: {g['title']}"
              + (f" ({len(g['copies'])} copies)" if g.get("copies") else "")
              for g in doc["guardrails"]]
    human += [f"skill {s['key']} ({len(s['parts'])} part(s))" for s in doc["skills"]]
    if doc["persona"]:
        human.append(f"persona {doc['persona']['id']}")
    out.doc(doc, "\n".join(human))
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``conflicts`` and ``mcp`` to the main parser's subcommands."""
    cls = type(common)
    c: argparse.ArgumentParser = sub.add_parser(
        "conflicts", parents=[common],
        help="conflict packets: list, show, claim, renew, release, resolve")
    verbs = c.add_subparsers(dest="verb", metavar="VERB", parser_class=cls)
    verbs.required = True

    def verb(name: str, help: str, packet: bool = True) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, parents=[common], help=help)
        v.add_argument("--space", metavar="SPACE", help="space id or name (default: the only one)")
        if packet:
            v.add_argument("packet", metavar="PACKET", help="packet id (pk-…) or entry id")
        return v

    verb("list", "open conflict packets", packet=False)
    s = verb("show", "a packet: base, ours, theirs, authors, merged body with markers")
    s.add_argument("--page", type=int, metavar="N", help="page N of a truncated candidate")
    cl = verb("claim", "take a lease on a packet; prints {token, expires_at}")
    cl.add_argument("--agent", required=True, metavar="NAME", help="who works on it")
    cl.add_argument("--ttl", type=int, metavar="S", help=f"lease seconds (default {DEFAULT_TTL_S})")
    rn = verb("renew", "extend your lease")
    rn.add_argument("--claim", required=True, metavar="TOKEN")
    rn.add_argument("--ttl", type=int, metavar="S")
    rl = verb("release", "give up your lease")
    rl.add_argument("--claim", required=True, metavar="TOKEN")
    rs = verb("resolve", "answer a packet and publish it (one sync)")
    rs.add_argument("--digest", metavar="D",
                    help="the packet digest you read: refused as packet_stale if the packet "
                         "changed since (default: the packet as it is now)")
    rs.add_argument("--no-sync", action="store_true",
                    help="resolve here only; the next quire sync publishes it")
    rs.add_argument("--claim", metavar="TOKEN", help="your claim token (required when claimed)")
    rs.add_argument("--take", choices=["ours", "theirs"])
    rs.add_argument("--file", metavar="MERGED.md", help="the full merged entry in vault form")
    rs.add_argument("--delete", action="store_true", help="delete the entry")
    rs.add_argument("--keep-both", action="store_true",
                    help="keep the hub's version here and yours under a new slug, linked")
    rs.add_argument("--agent", metavar="NAME", help="resolving agent (default: the claim's "
                                                    "agent, or $QUIRE_AGENT)")
    c.set_defaults(func=cmd_conflicts)

    m = sub.add_parser("mcp", parents=[common],
                       help="serve this replica to an agent over MCP (stdio)")
    m.add_argument("--space", metavar="SPACE",
                   help="the one space the session serves (default: the exported "
                        "delegation's, or the only one joined)")
    m.add_argument("--agent", metavar="NAME",
                   help="required (or $QUIRE_AGENT, or an exported QUIRE_DELEGATION_TOKEN): "
                        "the agent this session acts as; it obtains and renews a delegation "
                        "of this device for the space, so the hub's rules and audit see the "
                        "agent; without a name the server does not start (exit 2)")
    m.add_argument("--write", action="store_true",
                   help="a write delegation (default: read; the agent cannot publish)")
    m.add_argument("--ttl", metavar="DURATION",
                   help="lifetime of each delegation, renewed while the session runs "
                        "(e.g. 8h, the default; at most 24h)")
    m.add_argument("--model", metavar="NAME", help="the model, for provenance "
                                                   "(default: $QUIRE_MODEL)")
    m.set_defaults(func=cmd_mcp)

    b = sub.add_parser("bootstrap", parents=[common],
                       help="the world model an agent starts from: guardrails, skills, "
                            "persona, recent context (docs/agents.md)")
    b.add_argument("space", metavar="SPACE", help="space id or name (always named)")
    b.add_argument("--persona", metavar="ID", help="persona/<slug> (default: the space's)")
    b.add_argument("--runtime", metavar="FILE.json",
                   help='runtime input: {"skills": [{key, body, override}], "guardrails": '
                        '[{key, severity, body}]}')
    b.add_argument("--max-bytes", type=int, default=32 * 1024, metavar="N",
                   help="size bound of the bundle (default 32768; guardrails never dropped)")
    b.set_defaults(func=cmd_bootstrap)
