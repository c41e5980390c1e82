"""The `screenshot-service` command (service.cli.main); `python -m service.cli` runs it too."""
