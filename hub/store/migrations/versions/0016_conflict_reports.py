"""conflict reports: the open conflicts each replica last reported (a summary, no content)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 11:20:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'conflict_reports',
        sa.Column('replica_id', sa.String(length=26), nullable=False),
        sa.Column('entry_id', sa.String(length=240), nullable=False),
        sa.Column('space_id', sa.String(length=26), nullable=False),
        sa.Column('packet_id', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('since', sa.BigInteger(), nullable=False),
        sa.Column('claimed', sa.Boolean(), nullable=False),
        sa.Column('reported_by', sa.String(length=26), nullable=False),
        sa.Column('reported_at', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['replica_id'], ['replicas.id']),
        sa.ForeignKeyConstraint(['space_id'], ['spaces.id']),
        sa.PrimaryKeyConstraint('replica_id', 'entry_id'),
    )
    op.create_index('conflict_reports_space', 'conflict_reports', ['space_id'])


def downgrade() -> None:
    op.drop_index('conflict_reports_space', table_name='conflict_reports')
    op.drop_table('conflict_reports')
