"""Tests of ``replica/watch/``: the watcher's core, threads, socket and its end-to-end
runs (``conftest.py``: one real hub per module)."""
