"""Conflict packets, claims and resolutions: the pure packet values, the desk that claims
and resolves them on a copy, and the report of open conflicts a replica sends the hub.

May import: ``engine`` and everything below it.
"""
