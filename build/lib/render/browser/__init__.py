"""Chromium behind a supervisor, and the tabs it hands out (kept, spare, wiped between jobs)."""
