"""Tests of ``hub/console/``: the web console, in-process, over OIDC and in a browser."""
