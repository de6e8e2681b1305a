"""oidc: a sign-in email per user, and the pending OpenID Connect sign-ins of browsers

Revision ID: 0017
Revises: 0014
"""
import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # set by the hub operator (`quire hub email`), stored lower-case; one user per address
    with op.batch_alter_table('users') as batch:
        batch.add_column(sa.Column('email', sa.String(length=320), nullable=True))
        batch.create_index('ix_users_email', ['email'], unique=True)
    # one row per sign-in sent to the provider: the browser's cookie (its hash is the id)
    # finds the state, nonce and PKCE verifier; taken (deleted) by the first callback
    op.create_table(
        'console_oidc_logins',
        sa.Column('id', sa.String(64), primary_key=True),
        sa.Column('data', sa.Text(), nullable=False),
        sa.Column('created_at', sa.BigInteger(), nullable=False),
        sa.Column('expires_at', sa.BigInteger(), nullable=False),
        sa.Index('ix_console_oidc_logins_expires', 'expires_at'),
    )


def downgrade() -> None:
    op.drop_table('console_oidc_logins')
    with op.batch_alter_table('users') as batch:
        batch.drop_index('ix_users_email')
        batch.drop_column('email')
