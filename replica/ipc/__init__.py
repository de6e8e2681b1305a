"""What a ``quire`` command and a running watcher share on this machine: the watch lock,
the watcher's status file, its socket's wire, and the journal a command asks it for.

May import: ``vault``, ``store``, ``shared``.
"""
