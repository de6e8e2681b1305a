"""The world model an agent starts from (AMCS; docs/agents.md, "World model"): one bounded,
versioned bundle built from a replica, or from the hub's head. Pure functions over entries;
``bootstrap_world_model`` (MCP, local and the hub's remote endpoint) and ``quire bootstrap
--json`` call ``bundle``.

    entries of the space ──► guardrails  (every guardrail/*; persona and runtime may add or
                      │                    raise, never lower; stricter severity wins on a key,
                      │                    every copy of a key listed)
                      ├────► skills      (by stable key: space → persona → runtime; an
                      │                    association's ``override`` replaces, else adds)
                      ├────► persona     (selected, or the space's default) + manifests
                      └────► recent      (entries of the last applied batches)
    bundle ──► size bound (drop recent, then manifests, then skills; never a guardrail)
           ──► version {seq, digest over the bundle}, generated_at

Entry layout (docs/agents.md): ``guardrail/<slug>`` (``meta.severity``, optional
``meta.key``), ``skill/<slug>`` (optional ``meta.key``: the stable key, default the slug),
``persona/<slug>`` (``meta.skills``: its skill associations, ``meta.guardrails``: guardrails
it adds), and ``space/profile`` (``meta.default_persona``, ``meta.skills``: the space's skill
associations; without it every skill of the space is associated with ``override: false``).
An association is ``{"skill": "skill/<slug>", "override": true|false}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.canonical import canonical_bytes
from shared.digest import sha256_hex
from shared.entry import SEVERITIES, Entry, guardrail_rank
from shared.kinds import effective_kind

PROFILE = "space/profile"
DEFAULT_MAX_BYTES = 32 * 1024
RECENT = 10
PART_CHARS = 4000  # a skill part's body in the bundle; the full text is one read away


@dataclass(frozen=True)
class SkillIn:
    """A skill contribution: from an entry, or given at runtime."""

    key: str
    title: str
    body: str
    source: str  # "space" | "persona:<id>" | "runtime"
    id: str | None = None
    override: bool = False


def _key(e: Entry) -> str:
    k = e.meta.get("key")
    return k if isinstance(k, str) and k else e.slug


def _assocs(raw: Any) -> list[tuple[str, bool]]:
    out = []
    for a in raw if isinstance(raw, list) else []:
        if isinstance(a, str):
            out.append((a, False))
        elif isinstance(a, dict) and isinstance(a.get("skill"), str):
            out.append((a["skill"], a.get("override") is True))
    return out


def _skill_ref(ref: str) -> str:
    return ref if "/" in ref else f"skill/{ref}"


def merge_skills(layers: Iterable[list[SkillIn]]) -> dict[str, dict[str, Any]]:
    """Skills by stable key, layer after layer: an ``override`` contribution replaces what
    the key accumulated; otherwise it is added unless the same text is already there."""
    acc: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for s in layer:
            part = {"title": s.title, "body": s.body, "source": s.source, "id": s.id}
            cur = acc.get(s.key)
            if cur is None or s.override:
                acc[s.key] = {"key": s.key, "parts": [part],
                              "overridden_by": s.source if cur is not None else None}
            elif all(p["body"] != s.body for p in cur["parts"]):
                cur["parts"].append(part)
    return acc


def merge_guardrails(space: list[Entry], added: list[dict[str, Any]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Guardrails by key, every copy combined: the space's entries (in the order given),
    then additions (persona, runtime). A key takes the strictest severity of its copies
    (block > warn > info > none) and the text of its strictest space copy (a persona or the
    run time may raise a key, ``raised_by``, never replace the space's text); a key with
    several copies lists each under ``copies``, strictest first. Nothing is dropped
    silently: an addition weaker than its key is ignored and reported. Returns
    (guardrails, ignored)."""
    copies: dict[str, list[dict[str, Any]]] = {}
    for e in space:
        copies.setdefault(_key(e), []).append({
            "id": e.id, "title": e.title, "body": e.body,
            "severity": SEVERITIES[guardrail_rank(e)] if guardrail_rank(e) >= 0 else None,
            "source": "space"})
    ignored = []
    for a in added:
        k, sev = a["key"], a.get("severity")
        cur = copies.get(k)
        if cur is not None and _rank(sev) < max(_rank(c["severity"]) for c in cur):
            ignored.append({"key": k, "source": a["source"], "severity": sev,
                            "kept": _strictest(cur)["severity"],
                            "reason": "guardrails are never weakened by a persona or at "
                                      "run time"})
            continue
        copies.setdefault(k, []).append({f: a.get(f) for f in
                                         ("id", "title", "body", "severity", "source")})
    out = []
    for k, cs in copies.items():
        top = _strictest([c for c in cs if c["source"] == "space"] or cs)
        strictest = _strictest(cs)
        g = dict(top, key=k, severity=strictest["severity"])
        if _rank(strictest["severity"]) > _rank(top["severity"]):
            g["raised_by"] = strictest["source"]
        if len(cs) > 1:
            g["copies"] = sorted(cs, key=lambda c: -_rank(c["severity"]))  # stable: order
        out.append(g)
    return sorted(out, key=lambda g: (-_rank(g["severity"]), g["key"])), ignored


def _strictest(cs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first of the strictest copies."""
    return max(cs, key=lambda c: _rank(c["severity"]))  # max keeps the first on ties


def _rank(sev: Any) -> int:
    return SEVERITIES.index(sev) if sev in SEVERITIES else -1


def runtime_guardrail_problems(raw: Any) -> list[dict[str, Any]]:
    """What is wrong with ``runtime_guardrails`` (the caller's own input, refused whole
    rather than read loosely): each needs a ``key``, a ``severity`` of info, warn or block
    and a ``body``; a guardrail of unknown strength is never taken as none."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        return [{"index": None, "problem": "runtime_guardrails must be a list"}]
    out = []
    for i, g in enumerate(raw):
        if not isinstance(g, dict):
            out.append({"index": i, "problem": "must be an object {key, severity, body}"})
            continue
        if not isinstance(g.get("key"), str) or not g["key"]:
            out.append({"index": i, "problem": "key must be a non-empty string"})
        if "severity" not in g:
            out.append({"index": i, "problem": "severity is missing (info, warn or block)"})
        elif g["severity"] not in SEVERITIES:
            out.append({"index": i, "problem": f"unknown severity {g['severity']!r} (info, "
                                               "warn or block)"})
        if not isinstance(g.get("body", ""), str) or not isinstance(g.get("title", ""), str):
            out.append({"index": i, "problem": "body and title must be strings"})
    return out


def _added_guardrails(raw: Any, source: str) -> list[dict[str, Any]]:
    out = []
    for g in raw if isinstance(raw, list) else []:
        if isinstance(g, dict) and isinstance(g.get("key"), str):
            out.append({"key": g["key"], "id": None, "title": str(g.get("title", g["key"])),
                        "body": str(g.get("body", "")), "severity": g.get("severity")
                        if g.get("severity") in SEVERITIES else None, "source": source})
    return out


def _manifest(e: Entry) -> dict[str, Any]:
    summary = e.meta.get("summary")
    if not isinstance(summary, str):
        summary = next((ln.strip() for ln in e.body.splitlines() if ln.strip()), "")
    return {"id": e.id, "title": e.title, "summary": summary[:200],
            "skills": len(_assocs(e.meta.get("skills")))}


def bundle(*, space: dict[str, Any], entries: dict[str, Entry], guardrails: list[Entry],
           head_seq: int | None, recent: list[dict[str, Any]], persona: str | None = None,
           runtime_skills: list[dict[str, Any]] | None = None,
           runtime_guardrails: list[dict[str, Any]] | None = None,
           max_bytes: int = DEFAULT_MAX_BYTES, now: int = 0,
           answer_bound: int | None = None,
           folders: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The world-model bundle. ``entries``: live entries by id (local view);
    ``guardrails``: the space's guardrails (already the stricter of synced and local).
    ``max_bytes`` bounds its canonical JSON; ``answer_bound`` (an MCP answer's budget,
    shared/answers.py ``ANSWER_BUDGET``) also bounds it as sent (``answer_cost``: a quote
    or a newline of a body costs several bytes there), whatever ``max_bytes`` asks.
    ``folders``: the space's folder mapping skills and personas are found by (D152)."""
    from shared.errors import InvalidRequest, NotFound

    problems = runtime_guardrail_problems(runtime_guardrails)
    if problems:
        raise InvalidRequest("runtime_guardrails: " + "; ".join(
            f"[{p['index']}] {p['problem']}" if p["index"] is not None else p["problem"]
            for p in problems), {"problems": problems})
    profile = entries.get(PROFILE)
    pmeta = profile.meta if profile is not None else {}
    kinds = {e.id: effective_kind(e.id, e.meta, folders) for e in entries.values()}
    skills = {e.id: e for e in entries.values() if kinds[e.id] == "skill"}
    personas = {e.id: e for e in entries.values() if kinds[e.id] == "persona"}

    def from_assocs(raw: Any, source: str) -> list[SkillIn]:
        out = []
        for ref, override in _assocs(raw):
            e = skills.get(_skill_ref(ref))
            if e is not None:
                out.append(SkillIn(_key(e), e.title, e.body, source, e.id, override))
        return out

    space_layer = (from_assocs(pmeta.get("skills"), "space") if "skills" in pmeta else
                   [SkillIn(_key(e), e.title, e.body, "space", e.id)
                    for e in sorted(skills.values(), key=lambda e: e.id)])
    chosen = persona or (pmeta.get("default_persona") if isinstance(
        pmeta.get("default_persona"), str) else None)
    pid = None
    if chosen is not None:
        pid = chosen if chosen.startswith("persona/") else f"persona/{chosen}"
        if pid not in personas:
            if persona is not None:
                raise NotFound(f"no persona {pid} in this space",
                               {"personas": sorted(personas)})
            pid = None  # a default that names a missing persona: none selected
    pe = personas.get(pid) if pid else None
    persona_layer = from_assocs(pe.meta.get("skills"), f"persona:{pid}") if pe else []
    runtime_layer = []
    for i, s in enumerate(runtime_skills or []):
        if not (isinstance(s, dict) and isinstance(s.get("key"), str)
                and isinstance(s.get("body"), str)):
            raise InvalidRequest(f"runtime_skills[{i}] needs key and body (strings)",
                                 {"index": i})
        runtime_layer.append(SkillIn(s["key"], str(s.get("title", s["key"])), s["body"],
                                     "runtime", None, s.get("override") is True))
    merged = merge_skills([space_layer, persona_layer, runtime_layer])
    added = (_added_guardrails(pe.meta.get("guardrails"), f"persona:{pid}") if pe else []) \
        + _added_guardrails(runtime_guardrails, "runtime")
    grails, ignored = merge_guardrails(guardrails, added)

    doc: dict[str, Any] = {
        "space": space,
        "guardrails": grails,
        "guardrails_ignored": ignored,
        "skills": [dict(s, parts=[dict(p, body=p["body"][:PART_CHARS],
                                       truncated=len(p["body"]) > PART_CHARS)
                                  for p in s["parts"]])
                   for s in sorted(merged.values(), key=lambda s: s["key"])],
        "persona": None if pe is None else {
            "id": pe.id, "title": pe.title, "body": pe.body[:PART_CHARS],
            "truncated": len(pe.body) > PART_CHARS,
            "default": pid == pmeta.get("default_persona")},
        "personas": [_manifest(e) for e in sorted(personas.values(), key=lambda e: e.id)],
        "recent": recent[:RECENT],
        "omitted": [],
    }
    _fit(doc, max_bytes)
    if answer_bound is not None:
        _fit_answer(doc, answer_bound)
    body_digest = sha256_hex(canonical_bytes(doc))
    doc["version"] = {"seq": head_seq, "digest": body_digest}
    doc["generated_at"] = now
    doc["max_bytes"] = max_bytes
    return doc


def _size(doc: dict[str, Any]) -> int:
    return len(canonical_bytes(doc)) + 200  # room for version, time and the bound


def _fit(doc: dict[str, Any], max_bytes: int) -> None:
    """Shrink to ``max_bytes``: recent context, then persona manifests, then skills (last
    first), then the persona's text; guardrails are never dropped."""
    for key in ("recent", "personas", "skills"):
        while _size(doc) > max_bytes and doc[key]:
            gone = doc[key].pop()
            doc["omitted"].append({"section": key, "id": gone.get("id") or gone.get("key")})
    if _size(doc) > max_bytes and doc["persona"] is not None and doc["persona"]["body"]:
        doc["persona"]["body"], doc["persona"]["truncated"] = "", True
        doc["omitted"].append({"section": "persona", "id": doc["persona"]["id"]})
    if _size(doc) > max_bytes:
        doc["over_bound"] = {"reason": "the guardrails alone exceed the size bound; every "
                                       "guardrail is kept", "bytes": _size(doc)}


ANSWER_ROOM = 400  # bytes as sent for what is added after the fit: version, time, bound


def _fit_answer(doc: dict[str, Any], bound: int) -> None:
    """Shrink, in ``_fit``'s order, until the bundle costs at most ``bound`` bytes as an
    MCP answer (``answer_cost``). The cost is followed as items go (each item's own cost,
    and its ``omitted`` note's) and measured again at the end: O(size), not O(size²)."""
    from shared.answers import answer_cost

    def item_cost(x: Any) -> int:  # an element of a list as sent, with its ", "
        return answer_cost({"x": x}) - answer_cost({"x": None}) + 4 + 2

    cost = answer_cost(doc) + ANSWER_ROOM
    while cost > bound:
        for key in ("recent", "personas", "skills"):
            while cost > bound and doc[key]:
                gone = doc[key].pop()
                note = {"section": key, "id": gone.get("id") or gone.get("key")}
                doc["omitted"].append(note)
                cost += item_cost(note) - item_cost(gone)
        cost = answer_cost(doc) + ANSWER_ROOM  # measured again: the estimate may be off
        if cost <= bound or not (doc["recent"] or doc["personas"] or doc["skills"]):
            break
    if cost > bound and doc["persona"] is not None and doc["persona"]["body"]:
        doc["persona"]["body"], doc["persona"]["truncated"] = "", True
        doc["omitted"].append({"section": "persona", "id": doc["persona"]["id"]})
        cost = answer_cost(doc) + ANSWER_ROOM
    if cost > bound:
        doc["over_bound"] = {"reason": "the guardrails alone exceed the answer's bound; "
                                       "every guardrail is kept", "bytes": cost}
