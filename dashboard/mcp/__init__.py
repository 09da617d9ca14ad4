"""Toolwatch's MCP server (docs/mcp.md): its tools answer agents from the same selectors and
services as the pages and the REST API, over Streamable HTTP at /mcp (http.py) and stdio
(manage.py mcpserver). server.py is the SDK's low-level Server, tools.py the thin adapters,
errors.py the error envelope every failed tool call answers with."""
