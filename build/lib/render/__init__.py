"""Render workers: warm Chromium, captures, post-processing. `render.contract.options` is the request contract."""
