"""Files and paths: docket's folders, docket.toml on disk, logs, files opened as what they claim to be."""
