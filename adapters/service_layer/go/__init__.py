"""`docket go`: one process supervises a planned run to its end (drive.py), each task in its own thread (task.py)."""
