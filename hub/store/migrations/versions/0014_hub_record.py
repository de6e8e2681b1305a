"""hub record: the public URL and signing key id a hub's processes must agree on

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 04:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: a hub made before this revision records them at its next start
    with op.batch_alter_table('hub_state') as batch:
        batch.add_column(sa.Column('public_url', sa.String(length=2000), nullable=True))
        batch.add_column(sa.Column('key_id', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('hub_state') as batch:
        batch.drop_column('key_id')
        batch.drop_column('public_url')
