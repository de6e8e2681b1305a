"""What a replica holds the hub to: the signed state root checked before anything the hub
sent stays in the store, the signed audit tips, and the hub key this machine pinned.

May import: ``store``, ``machine``, ``shared``.
"""
