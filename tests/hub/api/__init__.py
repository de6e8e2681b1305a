"""Tests of ``hub/api/``: the HTTP surface (request parsing, limits, the OpenAPI
document and its fuzzing, the event stream)."""
