"""The remote MCP endpoint (``/mcp``): a space's tools for agents without a replica (D136)."""
