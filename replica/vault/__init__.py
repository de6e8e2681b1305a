"""The vault: a folder of Markdown files, one per entry. Rendering and parsing, the
size-and-mtime walk, scans scoped by a watcher's journal, atomic writes and fsyncs, files a
clone creates in place, the presence check and the faults a sync survives.

May import: ``store``, ``shared``.
"""
