"""entry names: an index on the lowered entry id, so the guard finds a live entry whose name
is one file with a new one on macOS and Windows (name_collision, hub/admission.py
``check_names_txn``; docs/decisions.md D139)

Revision ID: 0027
Revises: 0026
"""
import sqlalchemy as sa
from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_entries_lower', 'entries', ['space_id', sa.text('lower(entry_id)')])


def downgrade() -> None:
    op.drop_index('ix_entries_lower', table_name='entries')
