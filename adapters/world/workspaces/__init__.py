"""Where agents and checks work: task workspaces and check executions, repositories of their own."""
