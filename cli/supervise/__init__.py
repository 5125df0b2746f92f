"""The developer's commands for a supervised run: go, watch, status, log, the inbox and its answers, approvals,
handoffs and the agents' MCP server (the web view, cli/web/, is built on them).
"""
