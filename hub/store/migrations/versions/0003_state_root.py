"""signed state: bucket lattices, roots, per-batch roots, epoch statements

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 04:00:00

Existing spaces get their state computed on first use (hub/state.py rebuilds a missing
row from the entries table); batches accepted before this revision have no root, so a
replica behind them is sent a snapshot (docs/protocol.md).
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('state_buckets',
    sa.Column('space_id', sa.String(length=26), nullable=False),
    sa.Column('bucket', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('lattice', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['space_id'], ['spaces.id'], ),
    sa.PrimaryKeyConstraint('space_id', 'bucket')
    )
    op.create_table('state_roots',
    sa.Column('space_id', sa.String(length=26), nullable=False),
    sa.Column('digests', sa.LargeBinary(), nullable=False),
    sa.Column('root', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['space_id'], ['spaces.id'], ),
    sa.PrimaryKeyConstraint('space_id')
    )
    op.create_table('space_epochs',
    sa.Column('space_id', sa.String(length=26), nullable=False),
    sa.Column('epoch', sa.String(length=26), nullable=False),
    sa.Column('statement', sa.Text(), nullable=False),
    sa.Column('at', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['space_id'], ['spaces.id'], ),
    sa.PrimaryKeyConstraint('space_id', 'epoch')
    )
    with op.batch_alter_table('batches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('state_root', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('batches', schema=None) as batch_op:
        batch_op.drop_column('state_root')
    op.drop_table('space_epochs')
    op.drop_table('state_roots')
    op.drop_table('state_buckets')
