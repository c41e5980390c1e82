"""The contract between the API and the workers: the options model, value types, formats, devices, errors,
sealing and what crosses the queue. Imports no Playwright, libvips or FastAPI."""
