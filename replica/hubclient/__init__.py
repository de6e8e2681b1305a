"""Talking to the hub: the HTTP client (the only importer of ``httpx2``), how the replica
authenticates (device tokens, DPoP), and the hub's bounded NDJSON streams.

May import: ``trust`` (the pinned key), ``machine``, ``shared``.
"""
