"""The replica store's schema (replica/store/store.py): its tables, indexes and triggers as SQL,
and the SQL fragments the store's queries share. Plain strings, no behaviour: the store
creates and upgrades with them."""

from __future__ import annotations

META_DDL = """CREATE TABLE IF NOT EXISTS meta (
	"key" VARCHAR(64) NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY ("key")
)"""

# the entry the vault file was last written from or last read as: what a person's
# edit of that file is based on (scan merges three-way when the store moved on)
# shown_hash: the hash of the bytes the file last showed, as far as this store knows them
# (written from, or read as; NULL: no file shown); shown_marker: those bytes carried this
# replica's conflict marker, naming the version of theirs it showed ('' for none; NULL: no
# marker). Set only where the file's content is known (a write done, a file read, a file
# found missing), never when a write is only journaled: docs/decisions.md, "What the file
# showed"
# whether synced / local is a tombstone: with the versions and the file stat these make
# the covering index below, so scans, dirty counts and the digest never read an entry
ENTRIES_DDL = """CREATE TABLE IF NOT EXISTS entries (
	id VARCHAR(300) NOT NULL,
	synced TEXT,
	synced_version VARCHAR(64),
	local TEXT,
	local_version VARCHAR(64),
	file_hash VARCHAR(64),
	file_size BIGINT,
	file_mtime_ns BIGINT,
	held BOOLEAN NOT NULL,
	file_base TEXT,
	synced_deleted BOOLEAN,
	local_deleted BOOLEAN,
	shown_hash VARCHAR(64),
	shown_marker VARCHAR(64),
	PRIMARY KEY (id)
)"""
ENTRIES_COVER = ("CREATE INDEX IF NOT EXISTS entries_cover ON entries (id, synced_version,"
                 " local_version, held, synced_deleted, local_deleted, file_hash, file_size,"
                 " file_mtime_ns)")
# partial indexes of the few rows a served status or no-op sync asks for (docs/decisions.md,
# "Served commands at 100,000 entries"): the dirty entries, and those with a recorded file
# whose stat is unknown (a journal scan looks at them: replica/vault/journal_scan.py); each query
# repeats the index's WHERE, so SQLite reads only those rows, not 100,000 of the cover
_DIRTY = ("(CASE WHEN synced_deleted THEN NULL ELSE synced_version END) IS NOT"
          " (CASE WHEN local_deleted THEN NULL ELSE local_version END)")
DIRTY_WHERE = "NOT held AND " + _DIRTY
UNSETTLED_WHERE = "file_hash IS NOT NULL AND (file_size IS NULL OR file_mtime_ns IS NULL)"
PARTIAL_INDEXES = (
    f"CREATE INDEX IF NOT EXISTS entries_dirty ON entries (id) WHERE {DIRTY_WHERE}",
    f"CREATE INDEX IF NOT EXISTS entries_unsettled ON entries (id) WHERE {UNSETTLED_WHERE}",
)

# The digest of the synced state is cached in ``meta`` (with the head it was computed at):
# any change of a synced version, by any code path, drops the cache in the same transaction
DIGEST_KEY = "digest_cache"
STATE_READY = "state_ready"  # meta: the state tables were built from this store (verify.py)
_DROP_DIGEST = f"DELETE FROM meta WHERE key = '{DIGEST_KEY}'"
DIGEST_TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS entries_digest_ins AFTER INSERT ON entries"
    f" BEGIN {_DROP_DIGEST}; END",
    f"CREATE TRIGGER IF NOT EXISTS entries_digest_del AFTER DELETE ON entries"
    f" BEGIN {_DROP_DIGEST}; END",
    f"CREATE TRIGGER IF NOT EXISTS entries_digest_upd AFTER UPDATE ON entries"
    f" WHEN old.id IS NOT new.id OR old.synced_version IS NOT new.synced_version"
    f" OR old.synced_deleted IS NOT new.synced_deleted BEGIN {_DROP_DIGEST}; END",
)

# The signed state (shared/state.py) of the synced entries: the lattices of the buckets,
# kept up to date in O(changed) by replica/trust/verify.py. Every change of a synced version, by
# any code path (the ORM, plain SQL), logs the entry and its previous live version in
# ``state_log`` in the same transaction (triggers), so the root is always computed from
# what the store really holds, never from what a code path says it wrote.
STATE_DDL = """CREATE TABLE IF NOT EXISTS state_buckets (
	bucket INTEGER NOT NULL,
	lattice BLOB NOT NULL,
	digest BLOB NOT NULL,
	PRIMARY KEY (bucket)
)"""
STATE_LOG_DDL = """CREATE TABLE IF NOT EXISTS state_log (
	id VARCHAR(300) NOT NULL,
	old VARCHAR(64),
	PRIMARY KEY (id)
)"""
_LIVE_OLD = "CASE WHEN old.synced_deleted THEN NULL ELSE old.synced_version END"
STATE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS entries_state_ins AFTER INSERT ON entries"
    " BEGIN INSERT OR IGNORE INTO state_log (id, old) VALUES (new.id, NULL); END",
    "CREATE TRIGGER IF NOT EXISTS entries_state_del AFTER DELETE ON entries"
    f" BEGIN INSERT OR IGNORE INTO state_log (id, old) VALUES (old.id, {_LIVE_OLD}); END",
    "CREATE TRIGGER IF NOT EXISTS entries_state_upd AFTER UPDATE ON entries"
    " WHEN old.synced_version IS NOT new.synced_version"
    " OR old.synced_deleted IS NOT new.synced_deleted"
    f" BEGIN INSERT OR IGNORE INTO state_log (id, old) VALUES (old.id, {_LIVE_OLD}); END",
)

# A scoped or partial replica (replica/trust/scoped.py): per bucket, the lattice sum of the
# live entries the hub holds and this store does not (what its answers left out, as the hub
# summed them); the state root is of the store's entries plus these. Empty for a replica
# that holds the whole space.
WITHHELD_DDL = """CREATE TABLE IF NOT EXISTS withheld_buckets (
	bucket INTEGER NOT NULL,
	lattice BLOB NOT NULL,
	PRIMARY KEY (bucket)
)"""

OUTBOX_DDL = """CREATE TABLE IF NOT EXISTS outbox (
	batch_id VARCHAR(26) NOT NULL,
	body TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (batch_id)
)"""

HISTORY_DDL = """CREATE TABLE IF NOT EXISTS history (
	n INTEGER NOT NULL,
	epoch VARCHAR(26) NOT NULL,
	seq BIGINT NOT NULL,
	batch_id VARCHAR(26),
	replica_id VARCHAR(26),
	batch_digest VARCHAR(64),
	head VARCHAR(64) NOT NULL,
	author TEXT,
	accepted_at BIGINT,
	kind VARCHAR(16) NOT NULL,
	entries TEXT NOT NULL,
	detail TEXT,
	PRIMARY KEY (n)
)"""
# detail: what the batch changed, page by page, for people (replica/engine/changes.py):
# ids, actions, line counts, field names and the provenance; never a title or a body

CONFLICTS_DDL = """CREATE TABLE IF NOT EXISTS conflicts (
	entry_id VARCHAR(300) NOT NULL,
	fields TEXT NOT NULL,
	base TEXT,
	ours TEXT,
	theirs TEXT,
	base_version VARCHAR(64),
	ours_version VARCHAR(64),
	theirs_version VARCHAR(64),
	theirs_author TEXT,
	theirs_seq BIGINT,
	body_with_markers TEXT,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (entry_id)
)"""

VAULT_PENDING_DDL = """CREATE TABLE IF NOT EXISTS vault_pending (
	entry_id VARCHAR(300) NOT NULL,
	content TEXT,
	prev_hash VARCHAR(64),
	PRIMARY KEY (entry_id)
)"""

RECEIPTS_DDL = """CREATE TABLE IF NOT EXISTS receipts (
	batch_id VARCHAR(26) NOT NULL,
	receipt TEXT NOT NULL,
	PRIMARY KEY (batch_id)
)"""


# The links each entry's local state makes (replica/store/links.py): one row per target as
# written (a wikilink's name, a Markdown link's path, a ``links`` field id), ``tail`` its
# folded last segment (what a backlink query looks up). Entries whose local state changed,
# by any code path, are marked in ``links_stale`` in the same transaction (triggers); the
# index catches up from it when read (D145)
LINKS_DDL = """CREATE TABLE IF NOT EXISTS links (
	src VARCHAR(300) NOT NULL,
	target TEXT NOT NULL,
	via VARCHAR(16) NOT NULL,
	tail TEXT NOT NULL,
	PRIMARY KEY (src, via, target)
)"""
LINKS_TAIL = "CREATE INDEX IF NOT EXISTS links_tail ON links (tail)"
LINKS_STALE_DDL = """CREATE TABLE IF NOT EXISTS links_stale (
	id VARCHAR(300) NOT NULL,
	PRIMARY KEY (id)
)"""
# every file a person imported (replica/app/importer.py): path in the import's folder and
# the SHA-256 of its bytes, once published; a second run skips them (an import resumed)
IMPORTED_DDL = """CREATE TABLE IF NOT EXISTS imported (
	path TEXT NOT NULL,
	sha256 VARCHAR(64) NOT NULL,
	entry_id VARCHAR(300) NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (path, sha256)
)"""
LINKS_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS entries_links_ins AFTER INSERT ON entries"
    " BEGIN INSERT OR IGNORE INTO links_stale (id) VALUES (new.id); END",
    "CREATE TRIGGER IF NOT EXISTS entries_links_del AFTER DELETE ON entries"
    " BEGIN INSERT OR IGNORE INTO links_stale (id) VALUES (old.id); END",
    "CREATE TRIGGER IF NOT EXISTS entries_links_upd AFTER UPDATE ON entries"
    " WHEN old.local_version IS NOT new.local_version"
    " OR old.local_deleted IS NOT new.local_deleted"
    " BEGIN INSERT OR IGNORE INTO links_stale (id) VALUES (old.id); END",
)
LINKS_BUILT = "links_built"  # meta: the links index holds every entry but links_stale's

TABLES_DDL = (META_DDL, ENTRIES_DDL, STATE_DDL, STATE_LOG_DDL, WITHHELD_DDL, OUTBOX_DDL,
              HISTORY_DDL, CONFLICTS_DDL, VAULT_PENDING_DDL, RECEIPTS_DDL, LINKS_DDL,
              LINKS_STALE_DDL, IMPORTED_DDL)
