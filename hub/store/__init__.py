"""The hub's storage: the only package that speaks SQL (SQLAlchemy, Alembic, the drivers).

    db.py          engines, ``Store`` (read / run_write with retries), group commit
    schema.py      the tables (SQLAlchemy Core), read by the queries and by Alembic
    migrate.py     Alembic: upgrade, current revision, head; migrations/ holds the revisions
    sql.py         ``Sql`` (plain SQL on the hot path), read_together, pipelined, notify_txn
    one module per concern, each the SQL of one part of the hub:
      spaces_sql, principals, invites, rules, identity, hub_state, audit_sql   rows by kind
      batches, guard_reads        the publication path (hub/guard.py, hub/feed.py)
      state_sql, read_index, purge_sql, console_sessions, oidc_logins
      X_sql for hub/X.py: blocks, screening, quotas, sharedlimits, space_delete,
                          restore, conflict_reports

A function whose name ends in ``_txn`` runs inside a transaction the caller opened with
``Store.read`` or ``Store.run_write`` and takes its connection first; ``run_write`` may run
it more than once (serialization failures, busy SQLite), so it must not act outside the
database. Domain modules in ``hub/`` call these functions; they import no SQLAlchemy.
"""
