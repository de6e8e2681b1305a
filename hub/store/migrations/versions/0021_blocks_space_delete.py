"""blocked versions (``quire admin revert --block``) and spaces' soft delete

Revision ID: 0021
Revises: 0016
Create Date: 2026-12-01 13:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # an entry version a revert blocked from coming back (hub/blocks.py)
    op.create_table(
        'blocked_versions',
        sa.Column('space_id', sa.String(length=26), nullable=False),
        sa.Column('entry_id', sa.String(length=240), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.Column('created_by', sa.String(length=26), nullable=False),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['space_id'], ['spaces.id']),
        sa.PrimaryKeyConstraint('space_id', 'entry_id', 'version'),
    )
    # a soft-deleted space (hub/space_delete.py): refused, kept until the retention ends
    with op.batch_alter_table('spaces') as batch:
        batch.add_column(sa.Column('deleted_at', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('deleted_statement', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('spaces') as batch:
        batch.drop_column('deleted_statement')
        batch.drop_column('deleted_at')
    op.drop_table('blocked_versions')
