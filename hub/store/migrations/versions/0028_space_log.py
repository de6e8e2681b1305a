"""space log: a Merkle log per space over its batches, epochs and witness policies, its
checkpoint signed into every head, and witness policies (docs/architecture.md, "The log
and its witnesses"; decisions.md D140)

The current epoch's batches of every space become the log's first leaves, in seq order
(earlier epochs are not logged: a replica's first checkpoint is taken as it comes, like a
pinned key).

Revision ID: 0028
Revises: 0027
"""
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def _leaf(epoch: str, seq: int, head: str, batch: str) -> tuple[str, bytes]:
    # shared/tlog.py batch_leaf, canonical JSON (sorted keys, no whitespace): frozen here so
    # this step means the same whatever the code becomes
    data = json.dumps({"batch": batch, "epoch": epoch, "head": head, "seq": seq},
                      sort_keys=True, separators=(",", ":"))
    return data, hashlib.sha256(b"\x00" + data.encode()).digest()


def upgrade() -> None:
    op.create_table(
        'log_nodes',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('level', sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column('idx', sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column('hash', sa.LargeBinary(), nullable=False),
        sa.Column('epoch', sa.String(length=26), nullable=True),
        sa.Column('seq', sa.BigInteger(), nullable=True),
        sa.Column('data', sa.Text(), nullable=True),
    )
    op.create_index('ix_log_nodes_head', 'log_nodes', ['space_id', 'epoch', 'seq'])
    op.create_table(
        'space_logs',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('size', sa.BigInteger(), nullable=False),
        sa.Column('built', sa.BigInteger(), nullable=False),
        sa.Column('frontier', sa.LargeBinary(), nullable=True),
    )
    op.create_table(
        'witness_policies',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('n', sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column('statement', sa.Text(), nullable=False),
        sa.Column('leaf', sa.BigInteger(), nullable=False),
        sa.Column('at', sa.BigInteger(), nullable=False),
    )
    conn = op.get_bind()
    nodes = sa.table('log_nodes', sa.column('space_id'), sa.column('level'),
                     sa.column('idx'), sa.column('hash'), sa.column('epoch'),
                     sa.column('seq'), sa.column('data'))
    for space_id, epoch in conn.execute(sa.text("SELECT id, epoch FROM spaces")).all():
        rows = conn.execute(sa.text(
            "SELECT seq, head_digest, digest FROM batches WHERE space_id = :s AND epoch = :e "
            "ORDER BY seq"), {"s": space_id, "e": epoch}).all()
        chunk = []
        for i, (seq, head, digest) in enumerate(rows):
            data, leaf = _leaf(epoch, int(seq), head, digest)
            chunk.append({"space_id": space_id, "level": 0, "idx": i, "epoch": epoch,
                          "seq": seq, "hash": leaf, "data": data})
            if len(chunk) == 1000:
                conn.execute(nodes.insert(), chunk)
                chunk = []
        if chunk:
            conn.execute(nodes.insert(), chunk)


def downgrade() -> None:
    op.drop_table('witness_policies')
    op.drop_table('space_logs')
    op.drop_index('ix_log_nodes_head', table_name='log_nodes')
    op.drop_table('log_nodes')
