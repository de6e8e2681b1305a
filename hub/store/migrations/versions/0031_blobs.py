"""attachments: the ``blobs`` table (an attachment's bytes per space and SHA-256) and a
space's own limit on one attachment (docs/architecture.md, "Attachments"; decisions.md D147)

Revision ID: 0031
Revises: 0030
"""
import sqlalchemy as sa
from alembic import op

revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'blobs',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('sha256', sa.String(length=64), primary_key=True),
        sa.Column('size', sa.BigInteger(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
    )
    with op.batch_alter_table('space_quota') as batch:
        batch.add_column(sa.Column('max_attachment_bytes', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('space_quota') as batch:
        batch.drop_column('max_attachment_bytes')
    op.drop_table('blobs')
