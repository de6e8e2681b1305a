"""The hub's identity and access checks in-process: tokens, DPoP proofs, credentials,
typed rules and the guard's races (``conftest.py``: a team of owner, editor and viewer
on the real app)."""
