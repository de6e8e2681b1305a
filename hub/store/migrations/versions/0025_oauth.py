"""oauth: the remote MCP endpoint's authorization server (hub/oauth/, D136): clients,
pending requests, consents, codes and tokens (by hash only), and the space setting that
lets remote agents write

Revision ID: 0025
Revises: 0024
"""
import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'oauth_clients',
        sa.Column('id', sa.String(64), primary_key=True),
        sa.Column('name', sa.String(200), nullable=False),
        sa.Column('info', sa.Text, nullable=False),
        sa.Column('created_at', sa.BigInteger, nullable=False))
    op.create_table(
        'oauth_requests',
        sa.Column('id', sa.String(64), primary_key=True),
        sa.Column('client_id', sa.String(64), sa.ForeignKey('oauth_clients.id'),
                  nullable=False),
        sa.Column('redirect_uri', sa.String(2000), nullable=False),
        sa.Column('redirect_explicit', sa.Boolean, nullable=False),
        sa.Column('code_challenge', sa.String(128), nullable=False),
        sa.Column('state', sa.String(500), nullable=True),
        sa.Column('scopes', sa.String(500), nullable=False),
        sa.Column('resource', sa.String(2000), nullable=True),
        sa.Column('created_at', sa.BigInteger, nullable=False),
        sa.Column('expires_at', sa.BigInteger, nullable=False),
        sa.Column('done_at', sa.BigInteger, nullable=True))
    op.create_table(
        'oauth_consents',
        sa.Column('id', sa.String(26), primary_key=True),
        sa.Column('client_id', sa.String(64), sa.ForeignKey('oauth_clients.id'),
                  nullable=False),
        sa.Column('user_id', sa.String(26), sa.ForeignKey('users.id'), nullable=False,
                  index=True),
        sa.Column('device_id', sa.String(26), sa.ForeignKey('devices.id'), nullable=False),
        sa.Column('delegation_id', sa.String(26), sa.ForeignKey('delegations.id'),
                  nullable=False),
        sa.Column('space_id', sa.String(26), sa.ForeignKey('spaces.id'), nullable=False),
        sa.Column('agent', sa.String(64), nullable=False),
        sa.Column('scopes', sa.String(200), nullable=False),
        sa.Column('created_at', sa.BigInteger, nullable=False),
        sa.Column('expires_at', sa.BigInteger, nullable=False),
        sa.Column('revoked_at', sa.BigInteger, nullable=True))
    op.create_table(
        'oauth_codes',
        sa.Column('code_hash', sa.String(64), primary_key=True),
        sa.Column('consent_id', sa.String(26), sa.ForeignKey('oauth_consents.id'),
                  nullable=False),
        sa.Column('client_id', sa.String(64), nullable=False),
        sa.Column('redirect_uri', sa.String(2000), nullable=False),
        sa.Column('redirect_explicit', sa.Boolean, nullable=False),
        sa.Column('code_challenge', sa.String(128), nullable=False),
        sa.Column('scopes', sa.String(200), nullable=False),
        sa.Column('resource', sa.String(2000), nullable=True),
        sa.Column('expires_at', sa.BigInteger, nullable=False),
        sa.Column('used_at', sa.BigInteger, nullable=True))
    op.create_table(
        'oauth_tokens',
        sa.Column('token_hash', sa.String(64), primary_key=True),
        sa.Column('kind', sa.String(8), nullable=False),
        sa.Column('consent_id', sa.String(26), sa.ForeignKey('oauth_consents.id'),
                  nullable=False, index=True),
        sa.Column('client_id', sa.String(64), nullable=False),
        sa.Column('scopes', sa.String(200), nullable=False),
        sa.Column('created_at', sa.BigInteger, nullable=False),
        sa.Column('expires_at', sa.BigInteger, nullable=False),
        sa.Column('used_at', sa.BigInteger, nullable=True),
        sa.Column('revoked_at', sa.BigInteger, nullable=True))
    op.create_table(
        'oauth_space_settings',
        sa.Column('space_id', sa.String(26), sa.ForeignKey('spaces.id'), primary_key=True),
        sa.Column('remote_writes', sa.Boolean, nullable=False),
        sa.Column('set_by', sa.String(26), nullable=False),
        sa.Column('set_at', sa.BigInteger, nullable=False))


def downgrade() -> None:
    for t in ('oauth_space_settings', 'oauth_tokens', 'oauth_codes', 'oauth_consents', 'oauth_requests',
              'oauth_clients'):
        op.drop_table(t)
