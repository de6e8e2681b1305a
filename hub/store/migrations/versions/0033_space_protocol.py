"""space protocol: the lowest wire protocol a space's replicas must speak, raised to 2 when
an entry carrying its file's text (``raw``) is accepted (docs/protocol.md, "Protocol
versions"; decisions.md D150)

Revision ID: 0033
Revises: 0032
"""
import sqlalchemy as sa
from alembic import op

revision = '0033'
down_revision = '0032'
branch_labels = None
depends_on = None


# plain ALTER TABLE both ways (SQLite has DROP COLUMN since 3.35): a batch table copy of
# ``spaces`` would drop a table other tables' foreign keys name


def upgrade() -> None:
    op.add_column('spaces', sa.Column('protocol', sa.Integer(), nullable=False,
                                      server_default='1'))


def downgrade() -> None:
    op.drop_column('spaces', 'protocol')
