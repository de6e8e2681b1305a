"""device codes: the address a device login was requested from, shown to the approver
before approval (device-approval phishing: docs/security.md, "Second device login")

Revision ID: 0023
Revises: 0022
"""
import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('device_codes') as batch:
        batch.add_column(sa.Column('requested_from', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('device_codes') as batch:
        batch.drop_column('requested_from')
