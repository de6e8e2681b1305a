"""Benchmarks of Quire side by side with a git daemon and pouchdb-server (bench/README.md).

Run with ``python -m bench.run [--quick]``; see ``docs/operations.md`` and ``bench/README.md``.
"""
