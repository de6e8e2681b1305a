"""The watcher (``quire watch``): the pure decision core and pacing, the daemon's threads,
the syncer that runs the engine, the socket server that answers commands, and unit files.

May import: ``app`` and everything below it.
"""
