"""The hub's OAuth 2.1 authorization server for the remote MCP endpoint (D136): scopes,
consent, tokens and the provider the ``mcp`` SDK's routes call."""
