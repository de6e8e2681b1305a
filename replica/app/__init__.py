"""The replica's service layer: open a joined space (home, hub client, store, engine) and
the operations every front end calls (CLI, MCP, watcher): agent grants, remote reads,
rejoin, revert, verify, the world model and bootstrap.

May import: ``conflicts``, ``engine`` and everything below them.
"""
