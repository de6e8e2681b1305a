"""Room ``witness``: ``quire witness serve``, a small service of its own (its own Ed25519 key,
its own SQLite file) that co-signs a space log's checkpoints only along one line of history
(docs/architecture.md, "The log and its witnesses"; decisions.md D140). It shares no code
with the hub but ``shared`` (tlog, merkle): run it anywhere, for any number of hubs.

May import: ``shared`` (and Starlette, uvicorn; the standard library's ``sqlite3``).
"""
