"""Render workers: warm Chromium, captures, post-processing. `render.options` is the request contract."""
