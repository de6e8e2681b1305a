"""space protocol: the lowest wire protocol a space's replicas must speak, raised to 2 when
an entry carrying its file's text (``raw``) is accepted (docs/protocol.md, "Protocol
versions"; decisions.md D150)

Revision ID: 0032
Revises: 0031
"""
import sqlalchemy as sa
from alembic import op

revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('spaces') as batch:
        batch.add_column(sa.Column('protocol', sa.Integer(), nullable=False,
                                   server_default='1'))


def downgrade() -> None:
    with op.batch_alter_table('spaces') as batch:
        batch.drop_column('protocol')
