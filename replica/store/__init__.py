"""The local store of one joined space: SQLite through the standard library's ``sqlite3``,
its schema and the values it holds (entry states, receipts).

May import: ``shared``.
"""
