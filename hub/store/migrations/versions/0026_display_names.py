"""display names: an invite may carry the new member's name (the default at join), and a
user's name records where it came from, so a first OpenID Connect sign-in replaces only a
name the member never chose (docs/decisions.md D138)

Revision ID: 0026
Revises: 0025
"""
import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('invites') as batch:
        batch.add_column(sa.Column('name', sa.String(length=100), nullable=True))
    with op.batch_alter_table('users') as batch:
        batch.add_column(sa.Column('name_source', sa.String(length=16), nullable=True))


def downgrade() -> None:
    # users is referenced by other tables' foreign keys: a batch copy-and-move of it fails
    # on SQLite with foreign keys on, so drop the plain column in place (SQLite >= 3.35)
    with op.batch_alter_table('users', recreate='never') as batch:
        batch.drop_column('name_source')
    with op.batch_alter_table('invites') as batch:
        batch.drop_column('name')
