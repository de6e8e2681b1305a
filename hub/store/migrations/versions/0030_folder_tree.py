"""folder tree: per space, a node per folder of its live entries (direct entries' lattice
and count, digest), whose top digest is the ``tree`` root signed into heads
(shared/foldertree.py; docs/architecture.md, "The state root"; decisions.md D143)

Existing spaces are built by the hub, not here: at its start, in the background
(hub/signed_state.py ``build_missing_trees``), or at a space's next publication; a head
computes the root from the entries until then.

Revision ID: 0030
Revises: 0029
"""
import sqlalchemy as sa
from alembic import op

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'folder_nodes',
        sa.Column('space_id', sa.String(length=26), sa.ForeignKey('spaces.id'),
                  primary_key=True),
        sa.Column('folder', sa.String(length=240), primary_key=True),
        sa.Column('parent', sa.String(length=240), nullable=True),
        sa.Column('lattice', sa.LargeBinary(), nullable=False),
        sa.Column('size', sa.BigInteger(), nullable=False),
        sa.Column('digest', sa.LargeBinary(), nullable=False),
    )
    op.create_index('ix_folder_nodes_parent', 'folder_nodes', ['space_id', 'parent'])


def downgrade() -> None:
    op.drop_index('ix_folder_nodes_parent', table_name='folder_nodes')
    op.drop_table('folder_nodes')
