"""The OpenAPI 3.1 document at /v1/openapi.json, built from the route table, the operation
table below and the body schemas the hub reads with (shared/schemas.py).

    ROUTES (paths, methods) ─┐
    OPS (summary, body, response, status, query) ─┼─> document() ─> /v1/openapi.json
    shared.schemas REQUESTS / RESPONSES / ERROR ──┘
                                                     /v1/docs: docs_page() renders it
                                                     into hub/api/static/docs.html (escaped,
                                                     no script, no CDN: a strict CSP)

``tests/hub/api/test_openapi.py`` checks every route has an entry here, every request schema's
fields are the ones the handler reads, and the document is valid OpenAPI 3.1.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared import PROTOCOL_VERSION
from shared.errors import ERROR_CLASSES, WIRE_CODES
from shared.schemas import ERROR, REQUESTS, RESPONSES


@dataclass(frozen=True)
class Op:
    summary: str
    response: str = "object"  # RESPONSES name, or "ndjson", "sse", "text"
    request: str | None = None  # REQUESTS name
    status: int = 200
    auth: bool = True
    query: tuple[tuple[str, dict[str, Any]], ...] = ()
    description: str = ""
    tags: tuple[str, ...] = field(default=())
    also_200: str = ""  # a 201 that answers 200 when nothing new was made: what it means


_INT = {"type": "integer", "minimum": 0}
_STR = {"type": "string"}
_LIMIT = {"type": "integer", "minimum": 1}
_DRY = "With `dry_run: true` nothing changes; the answer says what would."

OPS: dict[tuple[str, str], Op] = {
    ("GET", "/healthz"): Op("liveness", "ok", auth=False),
    ("GET", "/readyz"): Op("readiness: the database answers", "ok", auth=False),
    ("GET", "/v1/openapi.json"): Op("this document", "object", auth=False),
    # the remote MCP endpoint's discovery documents (RFC 9728, RFC 8414; D136): an MCP host
    # reads them before it signs in, so no token
    ("GET", "/.well-known/oauth-protected-resource/mcp"): Op(
        "remote MCP: protected-resource metadata (RFC 9728)", "object", auth=False),
    ("GET", "/.well-known/oauth-authorization-server/oauth"): Op(
        "remote MCP: authorization-server metadata (RFC 8414)", "object", auth=False),
    ("GET", "/v1/docs"): Op("this document as a page", "html", auth=False),
    ("GET", "/v1/hub"): Op("hub id, URL and signing key (pin it at join)", "hub", auth=False),
    ("GET", "/v1/keys"): Op("hub public keys (JWK)", "keys", auth=False),
    ("GET", "/v1/hub/keys"): Op(
        "the hub key rotation chain", "hub_keys", auth=False,
        description="The key the hub signs with now and every rotation statement, each "
                    "signed by the key it replaces (oldest first). A replica whose pinned "
                    "key no longer verifies walks it from its pin (docs/protocol.md)."),
    ("POST", "/v1/invites/redeem"): Op(
        "redeem an invite: register a device, grant a role", "tokens", "redeem", 201,
        auth=False, description="Rate limited per client address. With a credential, adds "
        "the invite's role to the caller's user instead of making a new one."),
    ("POST", "/v1/invites"): Op("create an owner enrollment invite (owners)", "invite",
                                "invite_create", 201),
    ("GET", "/v1/spaces"): Op("spaces the caller can see, with its role", "spaces"),
    ("POST", "/v1/spaces"): Op("create a space (owners)", "space", "space_create", 201),
    ("POST", "/v1/spaces/{space}/invites"): Op("create an invite for a role (admins)",
                                               "invite", "invite_create", 201),
    ("GET", "/v1/spaces/{space}/invites"): Op("list a space's invites (admins)"),
    ("POST", "/v1/spaces/{space}/replicas"): Op("register a replica of this device",
                                                "object", "replica_register", 201),
    ("GET", "/v1/spaces/{space}/replicas"): Op("list a space's replicas (admins)"),
    ("GET", "/v1/spaces/{space}/head"): Op(
        "current head, hub-signed, with role, rules and usage", "head",
        query=(("wait", {"type": "number", "minimum": 0}), ("after", _INT),
               ("epoch", {"type": "string"}), ("nonce", {"type": "string"})),
        description="`?wait=S&after=SEQ` long-polls until the head passes SEQ; `?nonce=` "
                    "signs the head over the caller's nonce (freshness)."),
    ("GET", "/v1/spaces/{space}/changes"): Op(
        "batches after a seq (NDJSON)", "ndjson",
        query=(("epoch", {"type": "string"}), ("after", _INT),
               ("limit", {"type": "integer", "minimum": 1}), ("scope", _STR),
               ("only", _STR)),
        description="`scope`: the read-rules fingerprint the caller's copy was built under "
                    "(empty: none); when the caller's scope is another now, "
                    "`snapshot_required` with `reason: scope` (docs/security.md, Read rules). "
                    "`only` (repeated): a partial replica's globs, intersected with the "
                    "caller's read scope (docs/replica.md, Scoped and partial replicas)."),
    ("GET", "/v1/spaces/{space}/snapshot"): Op(
        "every live entry at one head (NDJSON)", "ndjson", query=(("only", _STR),),
        description="`only` (repeated): a partial replica's globs, intersected with the "
                    "caller's read scope; what it leaves out is summed in `end.withheld`."),
    ("GET", "/v1/spaces/{space}/devices"): Op("hub-signed attestations of device keys"),
    ("GET", "/v1/spaces/{space}/verify"): Op(
        "the hub verifies its own chain, state root and (admins) audit chain",
        description="Re-hashes the epoch's batches from genesis and recomputes the state "
                    "root (`quire verify --hub`)."),
    ("POST", "/v1/spaces/{space}/batches"): Op(
        "publish a batch through the guard", "receipt", "batch", 201,
        query=(("rebase", {"type": "string", "enum": ["0", "1"]}),),
        description="201 with the signed receipt; 200 with `replayed: true` when this batch "
                    "was accepted before. Refusals: head_changed, base_mismatch, "
                    "epoch_changed, policy_denied, content_screened (every finding: "
                    "entry, line, rule), quota_exceeded, invalid_request…"),
    ("GET", "/v1/spaces/{space}/receipts/{replica}/{batch}"): Op("recover a receipt",
                                                                 "receipt"),
    ("POST", "/v1/spaces/{space}/epoch"): Op(
        "start a new epoch (admins), or preview it", "epoch_bump", "epoch_bump",
        description="With `dry_run: true` nothing is written (head, epoch and audit stay) and "
                    "`epoch` is null; either way `impact` says what the bump does: the "
                    "history left behind, the live entries carried into the new epoch, the "
                    "replicas that take a snapshot on their next sync, and who loses access "
                    "(nobody: members, roles and devices are untouched)."),
    ("POST", "/v1/spaces/{space}/purge"): Op(
        "remove entries' content from all history (admins), or preview it", "purge", "purge",
        description="A new epoch whose signed statement carries the reason and the purged "
                    "ids; the entries leave the current state and every stored batch, and "
                    "the database is compacted (`storage`). With `dry_run: true` nothing "
                    "changes and `epoch` is null; either way the answer lists the entries, "
                    "the batches touched and the replicas affected. `not_found` names ids "
                    "the space never held (docs/security.md, Purge)."),
    ("GET", "/v1/spaces/{space}/rules"): Op("a space's rules, defaults included"),
    ("GET", "/v1/spaces/{space}/kinds"): Op("a space's folder mapping (folder -> kind)"),
    ("POST", "/v1/spaces/{space}/kinds"): Op(
        "replace the folder mapping (admins)", "object", "kinds_set",
        description="`kinds`: folder path -> kind word (`{}`: the default layout). Refused "
                    "`invalid_request` with `reason: kinds_in_use` when a live entry would "
                    "become or stop being a guardrail; bumps `rules_version`."),
    ("GET", "/v1/spaces/{space}/scope"): Op(
        "what a member or an agent may read (read rules)",
        query=(("who", _STR), ("as", _STR)),
        description="A member asks for their own scope (`who` absent or `me`), an admin for "
                    "any member's or an agent's (`who=agent:NAME&as=USER`): the read rules "
                    "that apply and the live entries in and out of scope "
                    "(docs/security.md, Read rules)."),
    ("POST", "/v1/spaces/{space}/rules"): Op("add a rule (admins)", "object", "rule_add",
                                             201),
    ("POST", "/v1/spaces/{space}/rules/{rule}/remove"): Op("remove a rule (admins)",
                                                           "object", "dry_run",
                                                           description=_DRY),
    ("GET", "/v1/spaces/{space}/members"): Op("a space's members and roles"),
    ("POST", "/v1/spaces/{space}/members/{user}/role"): Op("set a member's role (admins)",
                                                           "object", "role_set",
                                                           description=_DRY),
    ("POST", "/v1/spaces/{space}/members/{user}/remove"): Op("remove a member (admins)",
                                                             "object", "dry_run",
                                                             description=_DRY),
    ("POST", "/v1/invites/{invite}/revoke"): Op("revoke an invite", "object", "dry_run",
                                                description=_DRY),
    ("GET", "/v1/devices"): Op("the caller's devices (owners: all with ?all=1)",
                               query=(("all", {"type": "string"}),)),
    ("POST", "/v1/devices/{device}/revoke"): Op("revoke a device", "object", "dry_run",
                                                description=_DRY),
    ("POST", "/v1/users/{user}/deactivate"): Op("deactivate a user (owners)", "object",
                                                "dry_run", description=_DRY),
    ("POST", "/v1/spaces/{space}/replicas/{replica}/revoke"): Op(
        "revoke a replica (admins)", "object", "dry_run", description=_DRY),
    ("PUT", "/v1/spaces/{space}/replicas/{replica}/conflicts"): Op(
        "report this replica's open conflicts (its own device; members)", "object",
        "conflict_report",
        description="A summary, no content; it replaces the replica's previous report. At "
                    "most 500 conflicts (more: `too_large`); a replica registered to another "
                    "device, or revoked, is `forbidden`. Sent by replicas after a sync whose "
                    "open conflicts changed; shown on the console's conflicts page."),
    ("GET", "/v1/delegations"): Op("the caller's delegations to agents"),
    ("POST", "/v1/delegations"): Op("delegate a space to an agent (device-bound token)",
                                    "object", "delegation_create", 201),
    ("POST", "/v1/delegations/{delegation}/revoke"): Op("revoke a delegation", "object",
                                                        "dry_run", description=_DRY),
    ("GET", "/v1/spaces/{space}/usage"): Op("usage and the quotas in force", "usage"),
    ("POST", "/v1/spaces/{space}/quota"): Op("set a space's own quotas (admins)", "usage",
                                             "quota_set"),
    ("GET", "/v1/spaces/{space}/screening/allows"): Op(
        "allowed screening findings of a space (members)", query=(("entry", _STR),),
        description="Each allow names one entry version and a rule name, a finding "
                    "fingerprint or `*` (docs/security.md, Screening)."),
    ("POST", "/v1/spaces/{space}/screening/allows"): Op(
        "allow a screening finding for one entry version (admins, audited)", "object",
        "screening_allow", 201,
        description="After it, that exact version publishes; another version of the entry "
                    "is screened again. `rule`: a rule name, the finding's fingerprint or "
                    "`*` (default)."),
    ("POST", "/v1/spaces/{space}/delete"): Op(
        "soft-delete a space (hub owners, audited)", "object", "dry_run",
        description="Members are refused from then on with `space_deleted` (410), which "
                    "carries the hub-signed deletion statement; the data is kept until "
                    "`space_retention_days` have passed, then purged. The answer's `impact` "
                    "counts members, live replicas, live entries and batches. " + _DRY),
    ("POST", "/v1/spaces/{space}/restore"): Op(
        "restore a deleted space, unchanged (hub owners, audited)", "object", "dry_run",
        description=_DRY),
    ("GET", "/v1/spaces/{space}/proposals"): Op(
        "proposals of the space, newest first (members: all, each with can_accept; "
        "agents: their own)", query=(("state", {"type": "string", "enum": [
            "open", "accepted", "rejected", "withdrawn", "stale", "all"]}),)),
    ("POST", "/v1/spaces/{space}/proposals"): Op(
        "file a proposal: a change the agent's rules refuse, with its reason (agents)",
        "object", "proposal_file", 201,
        description="The op's `base` must be the entry's current version (`base_mismatch` "
                    "otherwise). Only a delegated agent files (`forbidden`, `agents_only`)."),
    ("GET", "/v1/spaces/{space}/proposals/{proposal}"): Op(
        "one proposal, the entry as it is now and the diff between them"),
    ("POST", "/v1/spaces/{space}/proposals/{proposal}/accept"): Op(
        "accept: publish the change hub-attested with the caller's rights (members)",
        "object", "empty",
        description="The guard decides with the accepting member's role and rules; the "
                    "batch is signed by the member's hub-held device and its audit event "
                    "names the member and the agent. `proposal_stale` when the entry moved "
                    "(nothing overwritten), `proposal_closed` when already decided."),
    ("POST", "/v1/spaces/{space}/proposals/{proposal}/reject"): Op(
        "reject, with an optional reason (members who may make it, or the agent's member)",
        "object", "proposal_reject"),
    ("POST", "/v1/spaces/{space}/proposals/{proposal}/withdraw"): Op(
        "withdraw a proposal (the agent that filed it)", "object", "empty"),
    ("GET", "/v1/spaces/{space}/blocks"): Op(
        "entry versions blocked by `quire admin revert --block` (members)"),
    ("POST", "/v1/spaces/{space}/blocks"): Op(
        "block reverted entry versions from being published again (admins, audited)",
        "object", "version_block",
        description="Each names an entry id and its exact version (SHA-256 of the content); "
                    "the guard then refuses a batch writing it with `version_blocked`. "
                    + _DRY),
    ("GET", "/v1/audit"): Op(
        "export the audit log (NDJSON; owners, or a space's admins)", "ndjson",
        query=(("since", _INT), ("space", {"type": "string"})),
        description="Refused attempts (unauthorized, forbidden, policy_denied) are hub-chain "
                    "`refused` events, one per caller, code, route and window with a "
                    "`count`; an owner's export first writes the ones counted so far. The "
                    "tips of the chains are signed into every head (`audit_seq`, "
                    "`hub_audit_seq`…): `quire admin audit --verify` checks the export "
                    "against the tips its replicas kept."),
    ("GET", "/v1/audit/verify"): Op("verify the audit hash chain (as the hub holds it)",
                                    query=(("space", {"type": "string"}),)),
    ("POST", "/v1/token"): Op("refresh or device-code grant, with a DPoP proof", "tokens",
                              "token", auth=False,
                              description="The DPoP proof (header `DPoP`) binds the new "
                                          "tokens to the device key; no access token."),
    ("POST", "/v1/device/code"): Op("start a device login (RFC 8628)", "object",
                                    "device_start", 201, auth=False),
    ("POST", "/v1/device/preview"): Op(
        "what approving a device login would do: name as requested and as it will be, "
        "requesting address and time", "object", "device_approve",
        description="Changes nothing; counted with approvals (per user)."),
    ("POST", "/v1/device/approve"): Op("approve a device login by its user code", "object",
                                       "device_approve"),
    ("GET", "/v1/spaces/{space}/events"): Op(
        "live heads, epoch changes and revocations (server-sent events)", "sse"),
    # remote reads (hub/api/reads.py): entry ids travel as the ``id`` query parameter
    ("GET", "/v1/spaces/{space}/entries"): Op(
        "live entries at the head, by id", query=(("prefix", _STR), ("after", _STR),
                                                  ("limit", _LIMIT))),
    ("GET", "/v1/spaces/{space}/entry"): Op(
        "one entry, at the head or at a seq", query=(("id", _STR), ("seq", _INT),
                                                     ("epoch", _STR))),
    ("GET", "/v1/spaces/{space}/history"): Op("an entry's changes, newest first",
                                              query=(("id", _STR), ("limit", _LIMIT))),
    ("GET", "/v1/spaces/{space}/diff"): Op(
        "an entry between two seqs", query=(("id", _STR), ("from", _INT), ("to", _INT),
                                            ("epoch", _STR))),
    ("GET", "/v1/spaces/{space}/batch"): Op("one batch of the space by seq",
                                            query=(("seq", _INT), ("epoch", _STR))),
    ("GET", "/v1/spaces/{space}/people"): Op("the display names of the space's members"),
    ("GET", "/v1/spaces/{space}/backlinks"): Op("the live pages whose links find one page",
                                                query=(("id", _STR),)),
    ("POST", "/v1/users/{user}/name"): Op("rename a user", "object", "user_rename",
                                          description=_DRY),
    ("GET", "/v1/spaces/{space}/search"): Op("entries holding every word, at the head",
                                             query=(("q", _STR), ("limit", _LIMIT))),
    # the space log and its witnesses (hub/api/spacelog.py, D140)
    ("GET", "/v1/spaces/{space}/log/consistency"): Op(
        "a consistency proof between two sizes of the space log, and the last leaf of the "
        "second", query=(("first", _INT), ("second", _INT))),
    ("GET", "/v1/spaces/{space}/log/inclusion"): Op(
        "the inclusion proof of the leaf a head is right after (a batch, a new epoch)",
        query=(("epoch", _STR), ("seq", _INT), ("size", _INT))),
    ("GET", "/v1/spaces/{space}/witnesses"): Op(
        "the space's witness policies, hub-signed, oldest first"),
    ("POST", "/v1/spaces/{space}/witnesses"): Op(
        "set the space's witnesses and quorum (hub owners, audited, a signed statement and a "
        "leaf of the log)", "object", "witnesses_set"),
    # attachments' bytes (hub/api/blobs.py, D147)
    ("PUT", "/v1/spaces/{space}/blobs/{sha256}"): Op(
        "upload an attachment's bytes (the raw body), checked against the SHA-256 in the URL",
        "blob", status=201, also_200="the space held these bytes already: nothing written",
        description="Editors. The body is the file's bytes, of at most the space's limit on "
                    "one attachment (`too_large`); bytes that do not hash to `sha256` are "
                    "`blob_mismatch`; stored bytes count in the space's `bytes` quota. With "
                    "`Content-Range: bytes START-END/TOTAL` the body is one range of a "
                    "resumable upload, which must start where the bytes received end "
                    "(`invalid_request`, `details.received`); 200 with `received` until the "
                    "range that completes it."),
    ("GET", "/v1/spaces/{space}/blobs/{sha256}/upload"): Op(
        "how much of a resumable upload the hub holds (editors)", "blob_upload",
        description="`received`: the bytes held so far (resume the next range there); "
                    "`stored`: the space holds the whole blob, nothing to send."),
    ("GET", "/v1/spaces/{space}/blobs/{sha256}"): Op(
        "an attachment's bytes, as a download (nosniff, sandboxed)", "bytes",
        query=(("name", _STR),),
        description="`name`: the file name for `Content-Disposition` and the media type "
                    "(by its extension; else `application/octet-stream`). A reader checks "
                    "the bytes against the signed entry's `sha256` and `size`."),
}

_MEDIA = {"ndjson": "application/x-ndjson", "sse": "text/event-stream",
          "text": "text/plain", "html": "text/html", "bytes": "application/octet-stream"}
_ERR_STATUS = sorted({c.status for code, c in ERROR_CLASSES.items() if code in WIRE_CODES})


def _operation(method: str, path: str, params: list[str]) -> dict[str, Any]:
    op = OPS.get((method, path)) or Op("")
    parameters = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                  for n in params]
    parameters += [{"name": n, "in": "query", "required": False, "schema": s}
                   for n, s in op.query]
    if op.response in _MEDIA:
        ok = {"description": op.summary,
              "content": {_MEDIA[op.response]: {"schema": {"type": "string"}}}}
    else:
        ok = {"description": op.summary, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{op.response}"}}}}
    responses: dict[str, Any] = {str(op.status): ok}
    if op.status == 201 and op.request == "batch":
        responses["200"] = dict(ok, description="a replay: the receipt as first sent")
    if op.also_200:
        responses["200"] = dict(ok, description=op.also_200)
    for status in _ERR_STATUS:
        codes = [c for c, k in ERROR_CLASSES.items() if k.status == status and c in WIRE_CODES]
        responses[str(status)] = {"description": ", ".join(codes), "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    doc: dict[str, Any] = {"summary": op.summary,
                           "description": op.description or op.summary,
                           "operationId": f"{method.lower()}_{path}".replace("/", "_")
                           .replace("{", "").replace("}", "").replace(".", "_"),
                           "parameters": parameters, "responses": responses}
    if op.auth:
        doc["security"] = [{"DPoP": []}]
    if op.request:
        doc["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/req_{op.request}"}}}}
    return doc


def document(routes: list[Any]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for r in routes:
        for method in sorted(m for m in (r.methods or ()) if m not in ("HEAD", "OPTIONS")):
            paths.setdefault(r.path, {})[method.lower()] = _operation(
                method, r.path, list(r.param_convertors))
    schemas: dict[str, Any] = {"Error": ERROR}
    schemas.update({f"req_{k}": v for k, v in REQUESTS.items()})
    schemas.update(RESPONSES)
    return {"openapi": "3.1.0",
            "info": {"title": "Quire hub", "version": str(PROTOCOL_VERSION),
                     "description": "Shared memory for teams of AI agents: the hub's HTTP "
                                    "API. docs/protocol.md has the prose; every error is "
                                    "`{error: {code, message, details}}`."},
            "paths": paths,
            "components": {"schemas": schemas, "securitySchemes": {"DPoP": {
                "type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Authorization: DPoP <access token>` plus a `DPoP` proof "
                               "header signed by the device key (RFC 9449)"}}}}


# ---------------------------------------------------------------- the page at /v1/docs

_PAGE = Path(__file__).with_name("static") / "docs.html"


def _deref(schemas: dict[str, Any], s: Any) -> Any:
    ref = s.get("$ref") if isinstance(s, dict) else None
    return schemas.get(ref.rsplit("/", 1)[-1]) if isinstance(ref, str) else s


def docs_page(doc: dict[str, Any]) -> tuple[str, str]:
    """The document as an HTML page, rendered here (escaped) so the page runs no script at
    all: ``(html, csp)``, where the CSP allows nothing but the page's own style block (by
    its hash) and no framing."""
    e = html.escape
    schemas = doc["components"]["schemas"]
    parts = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            body = [f'<details><summary><span class="m">{e(method.upper())}</span>'
                    f'<span class="p">{e(path)}</span> <span class="s">{e(op["summary"])}'
                    f'</span></summary>',
                    f'<p>{e(op["description"])}{" (DPoP credential)" if op.get("security") else ""}'
                    '</p>']
            if op.get("parameters"):
                body.append("<p>Parameters: " + ", ".join(
                    f'{e(p["name"])} ({e(p["in"])})' for p in op["parameters"]) + "</p>")
            if op.get("requestBody"):
                schema = _deref(schemas, op["requestBody"]["content"]["application/json"]
                                ["schema"])
                body.append(f"<p>Request body:</p><pre>{e(json.dumps(schema, indent=2))}</pre>")
            for status, r in op["responses"].items():
                media = next(iter(r.get("content") or {}), "")
                body.append(f"<p>{e(status)} {e(media)}: {e(r['description'])}</p>")
                if media == "application/json" and status < "400":
                    schema = _deref(schemas, r["content"][media]["schema"])
                    body.append(f"<pre>{e(json.dumps(schema, indent=2))}</pre>")
            parts.append("\n".join(body) + "</details>")
    parts.append(f'<h2>Error</h2><pre>{e(json.dumps(schemas["Error"], indent=2))}</pre>')
    info = doc["info"]
    shell = _PAGE.read_text(encoding="utf-8")
    page = shell.replace("{info}", e(f"{info['description']} (OpenAPI {doc['openapi']}, "
                                     f"protocol {info['version']})")).replace(
        "{ops}", "\n".join(parts))
    style = shell[shell.index("<style>") + 7:shell.index("</style>")]
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'sha256-{digest}'; frame-ancestors 'none'; "
           "base-uri 'none'; form-action 'none'")
    return page, csp
