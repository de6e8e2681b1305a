"""guardrail keys: entries.key_digest, indexed, so the guard finds the guardrails that hold
a key when a put takes it (a new guardrail on a taken key is an update of its holders)

Revision ID: 0022
Revises: 0020
"""
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0020'
branch_labels = None
depends_on = None


def _key(entry_id: str, content: str) -> str:
    """shared/policy.py ``guardrail_key`` as of this revision: ``meta.key`` when a
    non-empty string, else the slug."""
    meta = json.loads(content).get("meta")
    k = meta.get("key") if isinstance(meta, dict) else None
    return k if isinstance(k, str) and k else entry_id.split("/", 1)[1]


def upgrade() -> None:
    with op.batch_alter_table('entries') as batch:
        batch.add_column(sa.Column('key_digest', sa.String(length=64), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text(
        "SELECT space_id, entry_id, content FROM entries "
        "WHERE entry_id LIKE 'guardrail/%' AND deleted = :f"), {"f": False}).fetchall()
    for space_id, entry_id, content in rows:
        digest = hashlib.sha256(_key(entry_id, content).encode("utf-8")).hexdigest()
        conn.execute(sa.text("UPDATE entries SET key_digest = :k WHERE space_id = :s "
                             "AND entry_id = :e"), {"k": digest, "s": space_id, "e": entry_id})
    op.create_index('ix_entries_key_digest', 'entries', ['space_id', 'key_digest'],
                    sqlite_where=sa.text('key_digest IS NOT NULL'),
                    postgresql_where=sa.text('key_digest IS NOT NULL'))


def downgrade() -> None:
    op.drop_index('ix_entries_key_digest', table_name='entries')
    with op.batch_alter_table('entries') as batch:
        batch.drop_column('key_digest')
