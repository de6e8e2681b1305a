"""The ``quire`` command: the console-script entry (standard library only, so a command a
watcher can answer starts fast), the parser and every command, shell completion, human
output, progress, exit codes, the demo and the doctor.

May import: every other room. ``hub`` only lazily, for ``quire hub …``.
"""
