"""shared limits: rate-limit buckets and the DPoP jti replay cache (PostgreSQL uses them)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 04:10:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # UNLOGGED on PostgreSQL: no WAL, no fsync per request; a crash empties the tables,
    # which only forgets buckets and jti values for at most the freshness window
    pg = op.get_bind().dialect.name == "postgresql"
    prefixes = ['UNLOGGED'] if pg else []
    op.create_table('rate_buckets',
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('tokens', sa.Float(), nullable=False),
    sa.Column('at', sa.BigInteger(), nullable=False),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('key'),
    prefixes=prefixes,
    )
    op.create_index('ix_rate_buckets_expires', 'rate_buckets', ['expires_at'], unique=False)
    op.create_table('dpop_jti',
    sa.Column('jti', sa.String(length=128), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('jti'),
    prefixes=prefixes,
    )
    op.create_index('ix_dpop_jti_expires', 'dpop_jti', ['expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_dpop_jti_expires', table_name='dpop_jti')
    op.drop_table('dpop_jti')
    op.drop_index('ix_rate_buckets_expires', table_name='rate_buckets')
    op.drop_table('rate_buckets')
