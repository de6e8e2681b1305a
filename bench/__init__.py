"""Benchmarks of Quire side by side with a git daemon and pouchdb-server (DESIGN §9).

Run with ``python -m bench.run [--quick]``; see ``docs/operations.md`` and ``bench/README.md``.
"""
