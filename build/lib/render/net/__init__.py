"""The network: which addresses captures may reach, and the egress proxy that enforces it on every connection."""
