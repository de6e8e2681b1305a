"""Tests of ``replica/store/``: the local SQLite store's statements and triggers."""
