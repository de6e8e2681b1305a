"""quotas: per-space usage counters and limits (hub/quotas.py)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 04:40:00

Existing spaces get their row on first use (counted from entries and batches).
"""
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('space_quota',
    sa.Column('space_id', sa.String(length=26), nullable=False),
    sa.Column('entries', sa.BigInteger(), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.Column('history_bytes', sa.BigInteger(), nullable=False),
    sa.Column('max_entries', sa.BigInteger(), nullable=True),
    sa.Column('max_bytes', sa.BigInteger(), nullable=True),
    sa.Column('max_history_bytes', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['space_id'], ['spaces.id'], ),
    sa.PrimaryKeyConstraint('space_id')
    )


def downgrade() -> None:
    op.drop_table('space_quota')
