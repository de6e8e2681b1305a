"""screening allows: an admin's allow of a content finding, scoped to one entry version

Revision ID: 0015
Revises: 0017
Create Date: 2026-12-01 11:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'screening_allows',
        sa.Column('id', sa.String(length=26), nullable=False),
        sa.Column('space_id', sa.String(length=26), nullable=False),
        sa.Column('entry_id', sa.String(length=240), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('rule', sa.String(length=64), nullable=False),
        sa.Column('created_by', sa.String(length=26), nullable=False),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['space_id'], ['spaces.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('space_id', 'entry_id', 'version', 'rule'),
    )
    op.create_index('screening_allows_space_entry', 'screening_allows',
                    ['space_id', 'entry_id'])


def downgrade() -> None:
    op.drop_index('screening_allows_space_entry', table_name='screening_allows')
    op.drop_table('screening_allows')
