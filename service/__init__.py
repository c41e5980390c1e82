"""The HTTP API: parsing, auth, quota and concurrency, dispatch to workers, responses."""
