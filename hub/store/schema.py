"""Tables of the hub database (SQLAlchemy Core). Migrations in ``migrations/`` create them;
this module is the single description both the queries and Alembic autogenerate read."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.engine import Connection

metadata = MetaData()

ID = String(26)
DIGEST = String(64)

hub_state = Table(
    "hub_state", metadata,
    Column("id", Integer, primary_key=True),  # always 1: the lock row for hub-level changes
    Column("hub_id", ID, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("audit_seq", BigInteger, nullable=False, default=0),
    Column("audit_digest", DIGEST, nullable=False),
    # the configuration of record (0014, hub/record.py): every process must agree with it
    Column("public_url", String(2000), nullable=True),
    Column("key_id", String(64), nullable=True),
)

# hub key rotation statements (0020, hub/keyrotation.py): each signed by the key it
# replaces; served whole to replicas (GET /v1/hub/keys), which follow them from their pin
hub_keys = Table(
    "hub_keys", metadata,
    Column("seq", Integer, primary_key=True),
    Column("key_id", String(64), nullable=False, unique=True),
    Column("statement", Text, nullable=False),  # canonical JSON, signature included
    Column("at", BigInteger, nullable=False),
)

users = Table(
    "users", metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(100), nullable=False),
    Column("is_owner", Boolean, nullable=False, default=False),
    Column("active", Boolean, nullable=False, default=True),
    Column("created_at", BigInteger, nullable=False),
    # the verified email an OpenID Connect sign-in is matched by (0017; `quire hub email`)
    Column("email", String(320), nullable=True),
    # where the name came from (0026): member (chosen at join or renamed by the member),
    # invite (the invite's name), admin, oidc (the provider's `name` claim), guess (this
    # machine's account or device name); NULL before 0026. A first OpenID Connect sign-in
    # replaces only a guess (docs/decisions.md D138)
    Column("name_source", String(16), nullable=True),
    Index("ix_users_email", "email", unique=True),
)

devices = Table(
    "devices", metadata,
    Column("id", ID, primary_key=True),
    Column("user_id", ID, ForeignKey("users.id"), nullable=False, index=True),
    Column("name", String(100), nullable=False),
    Column("public_key", String(64), nullable=False),
    # legacy bearer credential hash (0001); device-bound tokens (0002) leave it NULL
    Column("token_hash", DIGEST, nullable=True, unique=True),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
)

spaces = Table(
    "spaces", metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(63), nullable=False, unique=True),
    Column("epoch", ID, nullable=False),
    Column("head_seq", BigInteger, nullable=False),
    Column("head_digest", DIGEST, nullable=False),
    Column("rules_version", BigInteger, nullable=False, default=0),
    Column("audit_seq", BigInteger, nullable=False, default=0),
    Column("audit_digest", DIGEST, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # soft delete (0021, hub/space_delete.py): refused from then on, purged after retention
    Column("deleted_at", BigInteger, nullable=True),
    Column("deleted_statement", Text, nullable=True),  # hub-signed, served with space_deleted
    # the lowest wire protocol its replicas must speak (0033): 2 once an entry with raw
    # was accepted (docs/protocol.md, "Protocol versions"); never lowered
    Column("protocol", Integer, nullable=False, server_default="1"),
    # the folder mapping (0034): JSON folder path -> kind, NULL for the default layout
    # (shared/kinds.py ``folder_kind``; hub/admin.py ``set_kinds``)
    Column("kinds", Text, nullable=True),
)

members = Table(
    "members", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("user_id", ID, ForeignKey("users.id"), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

invites = Table(
    "invites", metadata,
    Column("id", ID, primary_key=True),
    Column("code_hash", DIGEST, nullable=False, unique=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=True),
    Column("role", String(16), nullable=False),  # viewer|editor|admin, or owner (hub-level)
    Column("created_by", ID, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),
    Column("used_by", ID, nullable=True),
    Column("revoked_at", BigInteger, nullable=True),
    Column("name", String(100), nullable=True),  # the new member's display name (0026)
)

replicas = Table(
    "replicas", metadata,
    Column("id", ID, primary_key=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False, index=True),
    Column("device_id", ID, ForeignKey("devices.id"), nullable=False, index=True),
    Column("name", String(100), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
)

batches = Table(
    "batches", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("epoch", ID, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("batch_id", ID, nullable=False),
    Column("replica_id", ID, nullable=False),
    Column("digest", DIGEST, nullable=False),
    Column("head_digest", DIGEST, nullable=False),
    Column("user_id", ID, nullable=False),
    Column("device_id", ID, nullable=False),
    Column("agent", String(64), nullable=True),
    Column("accepted_at", BigInteger, nullable=False),
    Column("body", Text, nullable=False),  # canonical wire batch, served as stored
    Column("receipt", Text, nullable=False),  # signed receipt JSON, replayed as stored
    # the state root right after this batch (0003; NULL for batches accepted before it)
    Column("state_root", DIGEST, nullable=True),
    UniqueConstraint("replica_id", "batch_id", name="uq_batches_replica_batch"),
)

entries = Table(
    "entries", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("entry_id", String(240), primary_key=True),
    Column("version", DIGEST, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("content", Text, nullable=False),  # canonical entry JSON
    Column("seq", BigInteger, nullable=False),
    Column("epoch", ID, nullable=False),
    # a live guardrail's key, hashed (SHA-256 hex of shared/policy.py ``guardrail_key``;
    # NULL for tombstones and other kinds): the guard finds a key's holders by this index
    # when a put takes a key (0022, hub/policy.py ``takeover_reads``)
    Column("key_digest", DIGEST, nullable=True),
)

Index("ix_entries_key_digest", entries.c.space_id, entries.c.key_digest,
      sqlite_where=entries.c.key_digest.isnot(None),
      postgresql_where=entries.c.key_digest.isnot(None))

audit = Table(
    "audit", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("chain", String(26), nullable=False),  # a space id, or "hub"
    Column("n", BigInteger, nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("action", String(64), nullable=False),
    Column("actor", Text, nullable=False),  # canonical JSON: user, device, agent
    Column("details", Text, nullable=False),  # canonical JSON
    Column("prev", DIGEST, nullable=False),
    Column("digest", DIGEST, nullable=False),
    UniqueConstraint("chain", "n", name="uq_audit_chain_n"),
)

Index("ix_audit_at", audit.c.at)

rules = Table(
    "rules", metadata,
    Column("id", ID, primary_key=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False, index=True),
    Column("effect", String(8), nullable=False),  # only "deny" today
    Column("who", String(64), nullable=False),  # a role, a user id, or "agents"
    Column("actions", String(64), nullable=False),  # comma-separated create,update,delete,read
    Column("entries", String(240), nullable=False),  # glob on entry ids
    Column("created_at", BigInteger, nullable=False),
    # read rules (0029): comma-separated kinds and tags the entry must have one of; null: any
    Column("kinds", String(240), nullable=True),
    Column("tags", String(240), nullable=True),
)

# ---------------------------------------------------------------- identity (0002)

refresh_tokens = Table(
    "refresh_tokens", metadata,
    Column("id", ID, primary_key=True),
    Column("family_id", ID, nullable=False, index=True),  # one login; reuse revokes it all
    Column("device_id", ID, ForeignKey("devices.id"), nullable=False, index=True),
    Column("token_hash", DIGEST, nullable=False, unique=True),  # SHA-256 of the secret
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),  # rotated: a second use is theft
    Column("revoked_at", BigInteger, nullable=True),
)

delegations = Table(
    "delegations", metadata,
    Column("id", ID, primary_key=True),
    Column("user_id", ID, ForeignKey("users.id"), nullable=False, index=True),
    Column("device_id", ID, ForeignKey("devices.id"), nullable=False, index=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False, index=True),
    Column("agent", String(64), nullable=False),
    Column("scope", String(8), nullable=False),  # read | write
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
)

device_codes = Table(
    "device_codes", metadata,
    Column("id", ID, primary_key=True),
    Column("device_code_hash", DIGEST, nullable=False, unique=True),
    Column("user_code_hash", DIGEST, nullable=False, unique=True),
    Column("device_name", String(100), nullable=False),
    Column("device_key", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    # the client address the login was started from, shown before approval (0023)
    Column("requested_from", String(64), nullable=True),
    Column("approved_by", ID, nullable=True),  # the user whose new device this becomes
    Column("approved_at", BigInteger, nullable=True),
    Column("used_at", BigInteger, nullable=True),  # tokens issued: never again
    Column("device_id", ID, nullable=True),
)


# ---------------------------------------------------------------- signed state (0003)
# shared/state.py draws the tree: 256 bucket lattices per space, their digests, the root

state_buckets = Table(
    "state_buckets", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("bucket", Integer, primary_key=True, autoincrement=False),
    Column("lattice", LargeBinary, nullable=False),  # 2048 bytes
)

state_roots = Table(
    "state_roots", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("digests", LargeBinary, nullable=False),  # 256 bucket digests, 32 bytes each
    Column("root", DIGEST, nullable=False),
)

space_epochs = Table(
    "space_epochs", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("epoch", ID, primary_key=True),
    Column("statement", Text, nullable=False),  # hub-signed epoch statement (canonical JSON)
    Column("at", BigInteger, nullable=False),
)


# ---------------------------------------------------------------- shared limits (0011)
# hub/sharedlimits.py: on PostgreSQL every hub process keeps its rate-limit buckets and
# its DPoP replay cache here, so limits hold across processes (SQLite: in memory)

rate_buckets = Table(
    "rate_buckets", metadata,
    Column("key", String(200), primary_key=True),  # "<limit>:<client address or id>"
    Column("tokens", Float, nullable=False),
    Column("at", BigInteger, nullable=False),  # Unix ms of the last take
    Column("ok", Boolean, nullable=False),  # did the last take get a token
    Column("expires_at", BigInteger, nullable=False),  # full again: the row can go
    Index("ix_rate_buckets_expires", "expires_at"),
)

dpop_jti = Table(
    "dpop_jti", metadata,
    Column("jti", String(128), primary_key=True),
    Column("expires_at", BigInteger, nullable=False),  # outside the iat window after this
    Index("ix_dpop_jti_expires", "expires_at"),
)


# ---------------------------------------------------------------- quotas (0013)
# hub/quotas.py: usage counted in the publishing transaction; limits set by space admins
# (NULL: the hub's settings)

space_quota = Table(
    "space_quota", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("entries", BigInteger, nullable=False),  # live entries
    Column("bytes", BigInteger, nullable=False),  # their canonical contents, UTF-8
    Column("history_bytes", BigInteger, nullable=False),  # every batch as stored
    Column("max_entries", BigInteger, nullable=True),
    Column("max_bytes", BigInteger, nullable=True),
    Column("max_history_bytes", BigInteger, nullable=True),
    # one attachment's bytes at most (null: the hub's setting; 0031, hub/blobs.py)
    Column("max_attachment_bytes", BigInteger, nullable=True),
)


# ---------------------------------------------------------------- OpenID Connect (0017)
# hub/console/oidc.py: a browser's pending sign-in, found by the hash of its cookie; the
# callback takes (deletes) the row, so a state is good once

console_oidc_logins = Table(
    "console_oidc_logins", metadata,
    Column("id", String(64), primary_key=True),
    Column("data", Text, nullable=False),  # authlib's state data: state, nonce, PKCE verifier
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Index("ix_console_oidc_logins_expires", "expires_at"),
)


# ---------------------------------------------------------------- screening (0015)

# an admin's allow of a screening finding (hub/screening.py): one entry version, one rule
# name or finding fingerprint ("*": every finding of that version)
screening_allows = Table(
    "screening_allows", metadata,
    Column("id", ID, primary_key=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False),
    Column("entry_id", String(240), nullable=False),
    Column("version", DIGEST, nullable=False),
    Column("rule", String(64), nullable=False),
    Column("created_by", ID, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("space_id", "entry_id", "version", "rule"),
    Index("screening_allows_space_entry", "space_id", "entry_id"),
)

# the open conflicts a replica last reported (hub/conflict_reports.py): a summary, no
# content; a report replaces the replica's previous one
conflict_reports = Table(
    "conflict_reports", metadata,
    Column("replica_id", ID, ForeignKey("replicas.id"), primary_key=True),
    Column("entry_id", String(240), primary_key=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False),
    Column("packet_id", String(64), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("since", BigInteger, nullable=False),
    Column("claimed", Boolean, nullable=False),
    Column("reported_by", ID, nullable=False),
    Column("reported_at", BigInteger, nullable=False),
    Index("conflict_reports_space", "space_id"),
)

# ---------------------------------------------------------------- revert --block (0021)
# an entry version a revert blocked (hub/blocks.py): the guard refuses a batch writing it
blocked_versions = Table(
    "blocked_versions", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("entry_id", String(240), primary_key=True),
    Column("version", DIGEST, primary_key=True),
    Column("seq", BigInteger, nullable=False),  # the batch whose revert blocked it
    Column("created_by", ID, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)


# ---------------------------------------------------------------- proposals (0024)
# a change an agent's rules refuse, filed with its reason (hub/proposals.py): the proposed
# entry (canonical JSON; a tombstone for a delete) and the version it was written against;
# open until a member accepts it (published hub-attested: hub/attested_publish.py), rejects
# it, its agent withdraws it, or its base moves (stale)
proposals = Table(
    "proposals", metadata,
    Column("id", ID, primary_key=True),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False),
    Column("entry_id", String(240), nullable=False),
    Column("base", DIGEST, nullable=True),  # null: a create
    Column("version", DIGEST, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("content", Text, nullable=False),
    Column("agent", String(64), nullable=False),
    Column("user_id", ID, nullable=False),  # the member the agent acts for
    Column("device_id", ID, nullable=False),
    Column("delegation_id", ID, nullable=True),
    Column("reason", Text, nullable=False),
    Column("state", String(16), nullable=False),  # open|accepted|rejected|withdrawn|stale
    Column("created_at", BigInteger, nullable=False),
    Column("decided_at", BigInteger, nullable=True),
    Column("decided_by", ID, nullable=True),
    Column("note", Text, nullable=True),  # a rejection's reason, or why it went stale
    Column("seq", BigInteger, nullable=True),  # the batch that published it (accepted)
    Column("epoch", ID, nullable=True),
    Index("proposals_space_state", "space_id", "state"),
)


# ---------------------------------------------------------------- attachments (0031)
# the bytes of attachments (hub/blobs.py): one row per space and SHA-256, uploaded before the
# batch that names it, checked against its hash on receipt; counted in the space's bytes;
# removed by a purge when no entry version left names it. In the database (SQLite and
# PostgreSQL alike), not in files: one transaction with the quota row, carried by backup and
# restore, served by every hub process on any host (docs/decisions.md D147)
blobs = Table(
    "blobs", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("sha256", DIGEST, primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# a resumable upload's bytes so far (``Content-Range``, 0032): appended range by range, moved
# into ``blobs`` (checked) by the range that completes it
blob_uploads = Table(
    "blob_uploads", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("sha256", DIGEST, primary_key=True),
    Column("total", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)


def count_rows_txn(conn: Connection) -> dict[str, int]:
    """Row counts of every table (tests compare them before and after bad input)."""
    out = {}
    for t in (users, devices, spaces, members, invites, replicas, batches, entries, audit,
              rules):
        out[t.name] = conn.execute(select(func.count()).select_from(t)).scalar_one()
    return out
