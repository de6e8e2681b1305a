"""The sync engine of one joined space (``engine.sync.Replica``): scan the vault into the
store, merge three ways, publish (push), take snapshots (clone), and the sync-time helpers
(markers, purges, reverts blocked, restores crossed, screening, the sync's report).

May import: ``ipc``, ``vault``, ``hubclient``, ``trust``, ``store``, ``machine``, ``shared``.
"""
