"""Code shared by the hub and the replica: canonical JSON, digests, ids, the entry model,
wire models, signatures and error codes. Pure functions only: no I/O, no framework."""

PROTOCOL_VERSION = 1
