"""The page: emulation, loading, preparation, blocking, consent and annoyances, and the scripts put in pages."""
