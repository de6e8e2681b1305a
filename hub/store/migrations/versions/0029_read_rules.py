"""read rules: a rule may name the kinds and tags of the entries it reaches (a read rule's
conditions beside its glob; docs/security.md, "Read rules", decisions.md D142)

Revision ID: 0029
Revises: 0028
"""
import sqlalchemy as sa
from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('rules') as batch:
        # comma-separated, like ``actions``; null: any
        batch.add_column(sa.Column('kinds', sa.String(length=240), nullable=True))
        batch.add_column(sa.Column('tags', sa.String(length=240), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('rules') as batch:
        batch.drop_column('tags')
        batch.drop_column('kinds')
