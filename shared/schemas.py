"""JSON Schemas (2020-12, as OpenAPI 3.1 uses them) of the hub's request and response bodies.

One description, two readers:

    REQUESTS[name] ──> hub/api/http.py read_json: the body's fields are exactly the
         │              schema's properties (unknown fields: invalid_request)
         └──────────> hub/api/openapi.py: requestBody of the operation
    RESPONSES[name] ─> hub/api/openapi.py: the 2xx response of the operation
    ERROR ───────────> every error response ({"error": {code, message, details}})

Values are then checked by the domain (``shared.wire.parse_batch``, ``shared.entry``,
``hub/spaces.py``…), which may refuse more than a schema says (a signature, a role); the
fuzz test (tests/hub/api/test_openapi_fuzz.py) checks that what the schema refuses the hub
refuses too, and that every response matches its schema.
"""

from __future__ import annotations

from typing import Any

from shared.errors import WIRE_CODES

ID = {"type": "string", "pattern": "^[0-9a-hjkmnp-tv-z]{26}$",
      "description": "canonical id: 26 characters of lowercase Crockford base32"}
DIGEST = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
ROLE = {"type": "string", "enum": ["viewer", "editor", "admin"]}
DRY = {"dry_run": {"type": "boolean", "description": "say what would change; change nothing"}}
TTL = {"type": "integer", "minimum": 1}


def _obj(props: dict[str, Any], required: tuple[str, ...] = (), open_: bool = False,
         **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        d["required"] = list(required)
    if not open_:
        d["additionalProperties"] = False
    d.update(extra)
    return d


ENTRY = _obj({
    "id": {"type": "string", "description": "<kind>/<slug>"},
    "title": {"type": "string"}, "body": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "links": {"type": "array", "items": {"type": "string"}},
    "meta": {"type": "object"}, "deleted": {"type": "boolean"},
}, ("id",))

REQUESTS: dict[str, dict[str, Any]] = {
    "redeem": _obj({"code": {"type": "string"}, "device_name": {"type": "string"},
                    "device_key": {"type": "string", "description": "Ed25519 public key, "
                                   "base64url"},
                    "user_name": {"type": "string", "description": "the display name the "
                                  "member chose (default: the invite's name, else "
                                  "default_name)"},
                    "default_name": {"type": "string", "description": "the machine's guess "
                                     "(its account's full name), used when neither the "
                                     "member nor the invite names them"},
                    "held_elsewhere": {"type": "array", "items": {"type": "string"},
                                       "description": "ids of spaces the caller's machine "
                                       "already holds in another vault: an invite for one "
                                       "is refused (already_joined) and stays unused"}},
                   ("code", "device_key"),
                   examples=[{"code": "qi_…", "device_name": "laptop",
                              "device_key": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]),
    "token": _obj({"grant_type": {"type": "string", "enum": [
        "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"]},
        "refresh_token": {"type": "string"}, "device_code": {"type": "string"}},
        ("grant_type",)),
    "device_start": _obj({"device_name": {"type": "string"},
                          "device_key": {"type": "string"}}, ("device_key",)),
    "device_approve": _obj({"user_code": {"type": "string"}}, ("user_code",)),
    "space_create": _obj({"name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$"}},
                         ("name",), examples=[{"name": "team-memory"}]),
    "invite_create": _obj({"role": {"type": "string",
                                    "enum": ["viewer", "editor", "admin", "owner"]},
                           "ttl_seconds": TTL,
                           "name": {"type": "string", "maxLength": 100,
                                    "description": "the new member's display name: the "
                                    "default they are offered at join"}}, ("role",),
                          examples=[{"role": "editor", "ttl_seconds": 86400}]),
    "replica_register": _obj({"name": {"type": "string"}}),
    "conflict_report": _obj({"conflicts": {
        "type": "array", "maxItems": 500, "items": _obj({
            "id": {"type": "string", "pattern": "^pk-[0-9a-f]{20}$"},
            "entry": {"type": "string"},
            "kind": {"type": "string", "enum": ["edit", "edit_delete", "create_create"]},
            "since": {"type": "integer", "minimum": 0},
            "claimed": {"type": "boolean"}}, ("id", "entry", "kind", "since", "claimed"))}},
        ("conflicts",), examples=[{"conflicts": [
            {"id": "pk-0123456789abcdef0123", "entry": "page/deploy", "kind": "edit",
             "since": 1764590000000, "claimed": False}]}]),
    "batch": _obj({
        "batch_id": ID, "replica_id": ID, "space": ID, "epoch": ID,
        "parent": _obj({"seq": {"type": "integer", "minimum": 0}, "digest": DIGEST},
                       ("seq", "digest")),
        "ops": {"type": "array", "minItems": 1, "items": {"oneOf": [
            _obj({"op": {"const": "put"}, "entry": ENTRY,
                  "base": {"oneOf": [DIGEST, {"type": "null"}]},
                  "from": {"type": "string", "description": "a rename: the id this entry "
                           "was moved from, deleted by the same batch"}},
                 ("op", "entry", "base")),
            _obj({"op": {"const": "delete"}, "id": {"type": "string"}, "base": DIGEST},
                 ("op", "id", "base"))]}},
        "provenance": {"oneOf": [{"type": "object", "additionalProperties":
                                  {"type": "string"}}, {"type": "null"}]},
        "digest": DIGEST, "signature": {"type": "string"},
    }, ("batch_id", "replica_id", "space", "epoch", "parent", "ops", "digest", "signature"),
        description="a signed batch (docs/protocol.md, Batch)"),
    "epoch_bump": _obj({"reason": {"type": "string", "minLength": 1, "maxLength": 500},
                        # a fork recovery (hub owners): the evidence of two histories, as
                        # `quire verify --evidence` reads it; this hub's log survives
                        "fork": _obj({"checkpoints": {"type": "array", "minItems": 2,
                                                      "maxItems": 2,
                                                      "items": {"type": "string"}},
                                      "consistency": _obj({
                                          "root": {"type": "string"},
                                          "proof": {"type": "array", "maxItems": 64,
                                                    "items": {"type": "string"}}},
                                          ("root", "proof"))},
                                     ("checkpoints",)),
                        **DRY}, ("reason",)),
    # proposals (hub/proposals.py): one op as a batch holds it, and the agent's reason
    "proposal_file": _obj({"op": {"oneOf": [
        _obj({"op": {"const": "put"}, "entry": ENTRY,
              "base": {"oneOf": [DIGEST, {"type": "null"}]}}, ("op", "entry", "base")),
        _obj({"op": {"const": "delete"}, "id": {"type": "string"}, "base": DIGEST},
             ("op", "id", "base"))]},
        "reason": {"type": "string", "minLength": 1, "maxLength": 2000}}, ("op", "reason"),
        description="a proposed change (docs/protocol.md, Proposals)"),
    "proposal_reject": _obj({"reason": {"type": "string", "maxLength": 2000}}),
    "empty": _obj({}),
    "purge": _obj({"entries": {"type": "array", "minItems": 1, "maxItems": 1000,
                               "items": {"type": "string"}},
                   "reason": {"type": "string", "minLength": 1, "maxLength": 500}, **DRY},
                  ("entries", "reason")),
    "rule_add": _obj({"effect": {"type": "string", "enum": ["allow", "deny"]},
                      "who": {"type": "string"}, "actions": {"type": "string"},
                      "entries": {"type": "string"},
                      # a read rule's conditions (hub/scope.py, D142)
                      "kinds": {"type": "array", "items": {"type": "string"}},
                      "tags": {"type": "array", "items": {"type": "string"}}, **DRY},
                     ("who", "actions", "entries")),
    "dry_run": _obj(DRY),
    "role_set": _obj({"role": ROLE, **DRY}, ("role",)),
    "kinds_set": _obj({"kinds": {"type": "object", "maxProperties": 64,
                                 "additionalProperties": {"type": "string"}}, **DRY},
                      ("kinds",), examples=[{"kinds": {"Skills": "skill",
                                                       "team/rules": "guardrail"}}]),
    "user_rename": _obj({"name": {"type": "string"}, **DRY}, ("name",)),
    "delegation_create": _obj({"space": {"type": "string"}, "agent": {"type": "string"},
                               "scope": {"type": "string", "enum": ["read", "write"]},
                               "ttl_seconds": TTL}, ("space", "agent")),
    "screening_allow": _obj({"entry": {"type": "string"}, "version": DIGEST,
                             "rule": {"type": "string"}}, ("entry", "version"),
                            examples=[{"entry": "page/deploy", "version": "3f5a…",
                                       "rule": "aws_access_key"}]),
    "version_block": _obj({"seq": {"type": "integer", "minimum": 1},
                           "versions": {"type": "array", "minItems": 1, "maxItems": 100,
                                        "items": _obj({"id": {"type": "string"},
                                                       "version": DIGEST},
                                                      ("id", "version"))},
                           **DRY}, ("seq", "versions")),
    "quota_set": _obj({f: {"oneOf": [{"type": "integer", "minimum": 0},
                                     {"type": "null"}]}
                       for f in ("max_entries", "max_bytes", "max_history_bytes",
                                 "max_attachment_bytes")},
                      minProperties=1),
    # a space's witness policy (hub/spacelog.py; docs/security.md, "The log and its
    # witnesses")
    "witnesses_set": _obj({
        "quorum": {"type": "integer", "minimum": 0,
                   "description": "how many of the witnesses must co-sign"},
        "witnesses": {"type": "array", "items": _obj({
            "name": {"type": "string"},
            "key": {"type": "string", "description": "Ed25519 public key, base64url"},
            "url": {"type": "string", "description": "the witness's base URL"}},
            ("name", "key", "url"))},
        "reason": {"type": "string"}}, ("quorum", "witnesses")),
}

ERROR = _obj({"error": _obj({
    "code": {"type": "string", "enum": list(WIRE_CODES)},
    "message": {"type": "string"},
    "details": {"type": "object"}}, ("code", "message", "details"))}, ("error",),
    examples=[{"error": {"code": "head_changed", "message": "the head moved since this batch "
                         "was made; pull, merge, push again",
                         "details": {"seq": 12, "digest": "…"}}}])

_SPACE = _obj({"id": ID, "name": {"type": "string"}}, ("id", "name"), open_=True)
_USAGE = _obj({"entries": {"type": "integer"}, "bytes": {"type": "integer"},
               "history_bytes": {"type": "integer"}, "quota": {"type": "object"},
               "own_quota": {"type": "object"}},
              ("entries", "bytes", "history_bytes", "quota"), open_=True)

RESPONSES: dict[str, dict[str, Any]] = {
    "ok": _obj({"ok": {"type": "boolean"}}, ("ok",)),
    "blob": _obj({"sha256": {"type": "string"}, "size": {"type": "integer"},
                  "stored": {"type": "boolean"}, "received": {"type": "integer"}},
                 ("sha256", "size", "stored")),
    "blob_upload": _obj({"sha256": {"type": "string"}, "received": {"type": "integer"},
                         "stored": {"type": "boolean"}}, ("sha256", "received", "stored")),
    "object": {"type": "object"},
    "hub": _obj({"hub_id": ID, "url": {"type": "string"}}, open_=True),
    "keys": _obj({"keys": {"type": "array", "items": {"type": "object"}}}, ("keys",)),
    # the hub key rotation chain (shared/hubkeys.py): each statement signed by the key it
    # replaces, oldest first; public_key is the key the hub signs with now
    "hub_keys": _obj({"hub_id": ID, "public_key": {"type": "string"},
                      "key_id": {"type": "string"},
                      "chain": {"type": "array", "items": _obj({
                          "hub": ID, "seq": {"type": "integer", "minimum": 1},
                          "previous": {"type": "string"},
                          "previous_key": {"type": "string"}, "key": {"type": "string"},
                          "key_id": {"type": "string"}, "at": {"type": "integer"},
                          "signature": {"type": "string"}},
                          ("hub", "seq", "previous", "previous_key", "key", "key_id", "at",
                           "signature"))}},
                     ("hub_id", "public_key", "key_id", "chain")),
    "tokens": _obj({"access_token": {"type": "string"}, "refresh_token": {"type": "string"},
                    "token_type": {"type": "string"}, "expires_in": {"type": "integer"}},
                   ("access_token",), open_=True),
    "spaces": _obj({"spaces": {"type": "array", "items": _SPACE}}, ("spaces",)),
    "space": _obj({"space": _SPACE}, ("space",), open_=True),
    "invite": _obj({"code": {"type": "string"}, "expires_at": {"type": "integer"}},
                   ("code",), open_=True),
    "head": _obj({"space": ID, "epoch": ID, "seq": {"type": "integer", "minimum": 0},
                  "digest": DIGEST, "role": {"type": "string"}, "rules": {"type": "array"},
                  # the space's folder mapping (folder -> kind), as the guard reads it
                  "kinds": {"type": "object", "additionalProperties": {"type": "string"}},
                  "usage": _USAGE,
                  # signed with the head: the audit chain tips the hub read with it
                  "audit_seq": {"type": "integer", "minimum": 0}, "audit_digest": DIGEST,
                  "hub_audit_seq": {"type": "integer", "minimum": 0},
                  "hub_audit_digest": DIGEST},
                 ("space", "epoch", "seq", "digest"), open_=True),
    "epoch_bump": _obj({
        "space": ID, "epoch": {"type": ["string", "null"]}, "previous": ID,
        "previous_seq": {"type": "integer", "minimum": 0},
        "reason": {"type": "string"}, "dry_run": {"type": "boolean"},
        "impact": _obj({
            "history_left": {"type": "object"},
            "entries_carried": {"type": "integer", "minimum": 0},
            "replicas_resnapshot": {"type": "array", "items": {"type": "object"}},
            "members": {"type": "integer", "minimum": 0},
            "loses_access": {"type": "array"}}, open_=True)},
        ("space", "epoch", "previous", "dry_run", "impact"), open_=True),
    "purge": _obj({
        "space": ID, "epoch": {"type": ["string", "null"]}, "previous": ID,
        "previous_seq": {"type": "integer", "minimum": 0},
        "reason": {"type": "string"}, "dry_run": {"type": "boolean"},
        "entries": {"type": "array", "items": _obj({"id": {"type": "string"},
                                                    "live": {"type": "boolean"}},
                                                   ("id", "live"))},
        "batches_touched": {"type": "integer", "minimum": 0},
        "batches": {"type": "array", "items": _obj({"epoch": ID, "seq": {"type": "integer"}},
                                                   ("epoch", "seq"))},
        "replicas_affected": {"type": "array", "items": {"type": "object"}},
        "storage": {"type": "object"}},
        ("space", "epoch", "previous", "dry_run", "entries", "batches_touched",
         "replicas_affected"), open_=True),
    "receipt": _obj({"receipt": {"type": "object"}, "replayed": {"type": "boolean"}},
                    ("receipt",)),
    "usage": _USAGE,
}
