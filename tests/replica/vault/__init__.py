"""Tests of ``replica/vault/``: rendering and parsing, walks and their attacks, faults,
presence, journal scans."""
