"""The tests' own servers, clients and helpers (pages apart, in pages/)."""
