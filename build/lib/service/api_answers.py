"""What the API's error body says, read once for its own clients (the `monitors` command, the MCP server)."""

from __future__ import annotations

import httpx


def refusal(response: httpx.Response) -> str:
    """One line: the error's code and message, and the fields it names (or the status and text of an answer that
    is not the API's error body)."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if not isinstance(body, dict):
        return f"HTTP {response.status_code}: {response.text[:300]}"
    fields = ", ".join(str(detail.get("field", "")) for detail in body.get("error_details") or []
                       if isinstance(detail, dict))
    return f"{body.get('error_code')}: {body.get('error_message')}" + (f" (fields: {fields})" if fields else "")
