"""read index: entry versions and full-text search for remote reads

A derived index over the batches (hub/reads.py keeps it caught up on read). Dropping these
tables loses nothing: the next read rebuilds them from history.

Revision ID: 0010
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'read_index',
        sa.Column('space_id', sa.String(26), primary_key=True),
        sa.Column('epoch', sa.String(26), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
    )
    op.create_table(
        'entry_versions',
        sa.Column('space_id', sa.String(26), primary_key=True),
        sa.Column('entry_id', sa.String(240), primary_key=True),
        sa.Column('epoch', sa.String(26), primary_key=True),
        sa.Column('seq', sa.BigInteger(), primary_key=True),
        sa.Column('version', sa.String(64), nullable=False),
        sa.Column('deleted', sa.Boolean(), nullable=False),
        # where the content is: the batch (src_epoch, src_seq) holds this version's op;
        # an epoch's base rows (seq 0) point back into the previous epoch
        sa.Column('src_epoch', sa.String(26), nullable=False),
        sa.Column('src_seq', sa.BigInteger(), nullable=False),
    )
    op.create_index('ix_entry_versions_space_epoch_seq', 'entry_versions',
                    ['space_id', 'epoch', 'seq'])
    op.create_table(
        'entry_text',
        sa.Column('rowid', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('space_id', sa.String(26), nullable=False),
        sa.Column('entry_id', sa.String(240), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('tags', sa.Text(), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.UniqueConstraint('space_id', 'entry_id', name='uq_entry_text_space_entry'),
    )
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER TABLE entry_text ADD COLUMN doc tsvector GENERATED ALWAYS AS "
                   "(to_tsvector('simple', title || ' ' || tags || ' ' || body)) STORED")
        op.execute("CREATE INDEX ix_entry_text_doc ON entry_text USING GIN (doc)")
    else:
        # external-content FTS5 table kept in step by triggers (SQLite's documented pattern)
        op.execute("CREATE VIRTUAL TABLE entry_fts USING fts5(title, tags, body, "
                   "content='entry_text', content_rowid='rowid', "
                   "tokenize='unicode61 remove_diacritics 0')")
        op.execute("CREATE TRIGGER entry_text_ai AFTER INSERT ON entry_text BEGIN "
                   "INSERT INTO entry_fts(rowid, title, tags, body) "
                   "VALUES (new.rowid, new.title, new.tags, new.body); END")
        op.execute("CREATE TRIGGER entry_text_ad AFTER DELETE ON entry_text BEGIN "
                   "INSERT INTO entry_fts(entry_fts, rowid, title, tags, body) "
                   "VALUES ('delete', old.rowid, old.title, old.tags, old.body); END")
        op.execute("CREATE TRIGGER entry_text_au AFTER UPDATE ON entry_text BEGIN "
                   "INSERT INTO entry_fts(entry_fts, rowid, title, tags, body) "
                   "VALUES ('delete', old.rowid, old.title, old.tags, old.body); "
                   "INSERT INTO entry_fts(rowid, title, tags, body) "
                   "VALUES (new.rowid, new.title, new.tags, new.body); END")


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        for t in ('entry_text_ai', 'entry_text_ad', 'entry_text_au'):
            op.execute(f"DROP TRIGGER IF EXISTS {t}")
        op.execute("DROP TABLE IF EXISTS entry_fts")
    op.drop_table('entry_text')
    op.drop_index('ix_entry_versions_space_epoch_seq', 'entry_versions')
    op.drop_table('entry_versions')
    op.drop_table('read_index')
