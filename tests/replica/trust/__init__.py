"""Tests of ``replica/trust/``: what the hub is held to (verify, audit tips, the pinned key),
and the hostile hubs that lie to it."""
