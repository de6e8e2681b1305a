"""Code shared by the hub and the replica: canonical JSON, digests, ids, the entry model,
wire models, signatures and error codes. Pure functions only: no I/O, no framework."""

# the wire's version, sent by replicas as the ``Quire-Protocol`` header (docs/protocol.md,
# "Protocol versions"); 2: a put's entry may carry ``raw``, its file's text (D150)
PROTOCOL_VERSION = 2
PROTOCOL_HEADER = "Quire-Protocol"
RAW_PROTOCOL = 2  # what a space that holds an entry with raw requires of its replicas
