"""Tests of ``shared/``: pure tables over values, no database, no socket."""
