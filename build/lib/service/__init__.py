"""screenshot-service's programs, one package each, and what they share at this package's top.

Programs (only `cli` starts the others, each when asked; none imports another: pyproject's import contracts):
- `api`: the HTTP API (routes, authentication, the capture path, the hand-off to render workers, the answers);
- `deliverer`: webhook deliveries and monitor runs (`screenshot-service webhooks`);
- `mcp`: the MCP server, a client of a running API;
- `runner`: `screenshot-service run`, the whole service on one machine;
- `cli`: the `screenshot-service` command and its one-shot commands.

Shared (import no program): settings, organisations, signatures (the one HMAC), quota (the one reservation),
errors, results and metadata (how a result is presented), the monitors' schedule, the options' JSON schema,
request parameters, the API's error body read by its clients, the embedded Redis, times.
"""
