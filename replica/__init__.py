"""The replica: this machine's full copy of a joined space (a SQLite store and a vault of
Markdown files), kept in step with the hub.

Rooms, from the bottom up (a room imports only rooms listed before it, and ``shared``;
``tests/unit/test_layering.py`` holds the table; the replica never imports ``hub``):

    machine    this machine's Quire home: hubs joined, spaces, device credentials
    store      the local SQLite store of one space (schema, records, connection)
    trust      what the hub is held to: signed state roots, audit tips, the pinned hub key
    hubclient  the HTTP client, its authentication and the NDJSON streams
    vault      the folder of Markdown files: rendering and parsing, walks, writes, presence
    ipc        what a command and a running watcher share: journal, socket wire, lock, status
    engine     the sync engine: scan, merge, push, clone and the sync-time helpers
    conflicts  conflict packets, the desk that claims and resolves them, reports to the hub
    app        the service layer every front end calls (CLI, MCP, watcher)
    watch      the watcher: decision core, daemon threads, syncer, socket server, units
    mcp        ``quire mcp``: a space served to an agent over MCP
    cli        the ``quire`` command: entry point, every command, human output, exit codes
"""
