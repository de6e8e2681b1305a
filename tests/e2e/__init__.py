"""End-to-end flows that cross the hub and the replica and belong to neither alone:
device revocation, rejoin, agent sessions, local rules, display names. Real ``quire hub
serve`` processes and the real ``quire`` CLI."""
