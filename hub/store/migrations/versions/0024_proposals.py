"""proposals: a change an agent's rules refuse, filed with its reason for a member to accept
(hub/proposals.py; docs/agents.md, "Proposals")

Revision ID: 0024
Revises: 0023
"""
import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'proposals',
        sa.Column('id', sa.String(length=26), nullable=False),
        sa.Column('space_id', sa.String(length=26), nullable=False),
        sa.Column('entry_id', sa.String(length=240), nullable=False),
        sa.Column('base', sa.String(length=64), nullable=True),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('deleted', sa.Boolean(), nullable=False),
        sa.Column('content', sa.Text(), nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=26), nullable=False),
        sa.Column('device_id', sa.String(length=26), nullable=False),
        sa.Column('delegation_id', sa.String(length=26), nullable=True),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
        sa.Column('decided_at', sa.BigInteger(), nullable=True),
        sa.Column('decided_by', sa.String(length=26), nullable=True),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('seq', sa.BigInteger(), nullable=True),
        sa.Column('epoch', sa.String(length=26), nullable=True),
        sa.ForeignKeyConstraint(['space_id'], ['spaces.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('proposals_space_state', 'proposals', ['space_id', 'state'])


def downgrade() -> None:
    op.drop_index('proposals_space_state', table_name='proposals')
    op.drop_table('proposals')
