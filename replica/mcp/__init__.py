"""``quire mcp``: one space's replica served to an agent over MCP (stdio): the server, how
each tool call is answered, and the text an agent reads first.

May import: ``app`` and everything below it.
"""
