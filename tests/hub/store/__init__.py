"""Tests of ``hub/store/``: the database layer (group commit, migrations, pool pings)."""
