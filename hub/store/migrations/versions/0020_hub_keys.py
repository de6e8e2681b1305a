"""hub keys: the chain of hub key rotation statements, each signed by the key it replaces

Revision ID: 0020
Revises: 0021
"""
import sqlalchemy as sa
from alembic import op

revision = '0020'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'hub_keys',
        sa.Column('seq', sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column('key_id', sa.String(64), nullable=False, unique=True),
        sa.Column('statement', sa.Text(), nullable=False),
        sa.Column('at', sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table('hub_keys')
