"""Tests of ``replica/engine/``: merge tables, the property tests, syncs and clones
in-process and end to end, purge."""
