"""The API's ASGI middleware, one a module: body limit, trace ids and the access log, hosted header names."""
