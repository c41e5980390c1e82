"""The `run` program: the whole service on one machine, its processes supervised (supervisor)."""
