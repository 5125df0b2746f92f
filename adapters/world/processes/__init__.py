"""Processes and the sandbox: starting, watching and stopping process groups, Landlock, namespaces, the egress proxy."""
