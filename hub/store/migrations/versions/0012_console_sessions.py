"""console sessions: browser sign-ins bound to a user and a device

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'console_sessions',
        sa.Column('id', sa.String(26), primary_key=True),
        sa.Column('token_hash', sa.String(64), nullable=False, unique=True),
        # a pending sign-in holds the device-login code until a signed-in device approves it;
        # it is worthless without the cookie: the device key is derived from the cookie
        sa.Column('device_code', sa.String(200), nullable=True),
        sa.Column('user_id', sa.String(26), nullable=True),
        sa.Column('device_id', sa.String(26), nullable=True),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
        sa.Column('expires_at', sa.BigInteger(), nullable=False),
        sa.Column('revoked_at', sa.BigInteger(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table('console_sessions')
