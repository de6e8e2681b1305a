"""resumable uploads: the bytes of an attachment received so far, per space and SHA-256,
until the last range completes it (hub/blobs.py; decisions.md D147)

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
    op.create_table(
        'blob_uploads',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('sha256', sa.String(length=64), primary_key=True),
        sa.Column('total', sa.BigInteger(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('updated_at', sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table('blob_uploads')
