"""space kinds: a space's folder mapping (folder path -> kind, JSON; NULL: the default
layout), set by an admin (``quire admin kinds set``) and read by the guard with the rules
(docs/architecture.md, "Entries and versions"; decisions.md D152)

Revision ID: 0034
Revises: 0033
"""
import sqlalchemy as sa
from alembic import op

revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None


# plain ALTER TABLE both ways, as 0033: a batch copy of ``spaces`` would drop the table
# other tables' foreign keys name


def upgrade() -> None:
    op.add_column('spaces', sa.Column('kinds', sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column('spaces', 'kinds')
