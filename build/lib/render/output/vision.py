"""AI vision: the final image and the caller's prompt sent to an OpenAI-compatible chat-completions API.

The caller's provider key must never be stored: RQ keeps job payloads in Redis, so it travels sealed with
the job's other secrets (`render.contract.sealing`: AES-GCM, a secret Redis never sees, bound to the job's
reference) and only the worker that runs the job opens it, in memory, for the one call.
"""

from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any

from render.contract import json_schema
from render.contract.errors import (
    CaptureTimeout,
    ErrorDetail,
    NetworkError,
    RequestNotValid,
    ServiceError,
    TemporaryUnavailable,
    VisionResponseInvalid,
)

if TYPE_CHECKING:
    import httpx

KEY_FIELD = "vision_provider_api_key"
DEFAULT_PROMPT = "Describe this screenshot."


def _provider_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.text[:200]
    if isinstance(error, dict):
        return str(error.get("message", ""))[:300]
    return str(error or "")[:300]


def _provider_error(response: httpx.Response) -> ServiceError:
    said = _provider_message(response)
    said = f": {said}" if said else ""
    status = response.status_code
    if status in (401, 403):
        return RequestNotValid(f"The vision provider refused the key (HTTP {status}){said}.",
                               [ErrorDetail(KEY_FIELD, "refused by the vision provider")])
    if status == 429:
        return TemporaryUnavailable(f"The vision provider is rate-limiting this key (HTTP 429){said}; retry "
                                    "later.")
    if 400 <= status < 500:
        return RequestNotValid(f"The vision provider refused the request (HTTP {status}){said}.",
                               [ErrorDetail("vision_prompt", "refused by the vision provider")])
    return NetworkError(f"The vision provider failed (HTTP {status}){said}; retry later.")


def _completion(body: Any) -> str:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise NetworkError("The vision provider answered without a completion (no choices[0].message.content)."
                           ) from None
    if isinstance(content, list):  # some providers answer with content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def structured(completion: str, schema: dict[str, Any]) -> str:
    """A completion that must follow `schema`: its JSON text as given, or VisionResponseInvalid saying where not."""
    try:
        answer = json.loads(completion)
    except ValueError:
        raise VisionResponseInvalid(f"The vision provider's answer is not JSON, as vision_response_schema needs: "
                                    f"{completion[:120]!r}.") from None
    try:
        errors = sorted(json_schema.validator(schema).iter_errors(answer), key=lambda error: list(error.path))
    except RecursionError:  # an answer nested deeper than Python's stack (the schema was checked on arrival)
        raise VisionResponseInvalid("The vision provider's answer is nested too deeply to check against "
                                    "vision_response_schema.") from None
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.path) or "the answer"
        raise VisionResponseInvalid(f"The vision provider's answer does not follow vision_response_schema at "
                                    f"{where}: {first.message[:200]}.")
    return completion


def ask(image: bytes, media_type: str, prompt: str | None, max_tokens: int | None, *, api_key: str,
        base_url: str, model: str, deadline: float, timeout: float, schema: dict[str, Any] | None = None) -> str:
    """The provider's completion for this image, or a ServiceError the caller can act on. With `schema`, the
    provider is asked for structured output (OpenAI's `response_format` of type `json_schema`) and the answer is
    checked against it."""
    import httpx  # on first use: with its command-line extras about 8 MB a worker rarely needs

    seconds = min(timeout, deadline - time.time())
    if seconds <= 0:
        raise CaptureTimeout("No time was left within timeout for the vision provider; raise timeout.")
    payload: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": prompt or DEFAULT_PROMPT},
            {"type": "image_url", "image_url": {
                "url": f"data:{media_type};base64,{base64.b64encode(image).decode()}"}},
        ]}],
    }
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    if schema is not None:
        payload["response_format"] = {"type": "json_schema", "json_schema": {"name": "screenshot_answer",
                                                                            "schema": schema, "strict": True}}
    url = f"{base_url.rstrip('/')}/chat/completions"
    try:
        with httpx.Client(timeout=seconds, trust_env=False) as client:
            response = client.post(url, json=payload, headers={"Authorization": f"Bearer {api_key}"})
    except httpx.TimeoutException:
        raise CaptureTimeout(f"The vision provider did not answer within {seconds:.0f} s.") from None
    except httpx.HTTPError as error:
        raise NetworkError(f"Could not reach the vision provider at {base_url} ({type(error).__name__}).") from None
    if response.status_code >= 300:
        raise _provider_error(response)
    try:
        completion = _completion(response.json())
    except ValueError:
        raise NetworkError("The vision provider answered with something that is not JSON.") from None
    return completion if schema is None else structured(completion, schema)
