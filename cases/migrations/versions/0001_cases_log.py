"""The cases log: its entries (Merkle leaves), a signed tree head for every size, the append
counter appends lock, and attachments by content.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "case_log",
        sa.Column("idx", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("case_id", sa.String(64), nullable=False),
        sa.Column("case_seq", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("subject", sa.String(200), nullable=True),  # on a case's first entry: its subject account
        sa.Column("alert_id", sa.String(200), nullable=True),  # on an entry that brings an alert
        sa.Column("line", sa.LargeBinary, nullable=False),  # the canonical JSON leaf data
        sa.UniqueConstraint("case_id", "case_seq", name="case_log_case_seq"),
    )
    op.create_index("case_log_subject", "case_log", ["subject"])
    op.create_index("case_log_alert", "case_log", ["alert_id"])
    op.create_table(
        "case_tree_heads",
        sa.Column("tree_size", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("root_hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(200), nullable=False),
        sa.Column("signature", sa.String(200), nullable=False),
    )
    op.create_table(
        "case_log_size",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("size", sa.BigInteger, nullable=False),
    )
    op.execute("INSERT INTO case_log_size (id, size) VALUES (1, 0)")
    op.create_table(
        "case_attachments",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    for table in ("case_attachments", "case_log_size", "case_tree_heads", "case_log"):
        op.drop_table(table)
