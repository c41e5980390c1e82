"""The capture pipeline: from a loaded page to an output (full page, regions, the CDP screenshot)."""
