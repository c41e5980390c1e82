"""From an HTTP request to raw parameters, keeping what signatures need.

GET: the query string. POST: a JSON body, the query string, or both; the body wins on a clash.
Arrays in a query string are repeated keys. JSON numbers keep their source text (`JsonNumber`)
because the canonical signature message uses them as sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_origin
from urllib.parse import parse_qsl

from pydantic import BaseModel

from render.contract import json_text
from render.contract.errors import ErrorDetail, RequestNotValid

CREDENTIAL_PARAMS = ("access_key", "signature")


class JsonNumber(str):
    """A JSON number as written in the body; validates as int or float, signs as its text."""

    __slots__ = ()


@dataclass
class RawParams:
    """The parameters of one request, before validation."""

    values: dict[str, Any]
    # (name, value) pairs in request order, query first, for the canonical signature message.
    pairs: list[tuple[str, str]] = field(default_factory=list)
    raw_query: str = ""
    method: str = "GET"
    access_key: str | None = None
    signature: str | None = None


def list_fields(model: type[BaseModel]) -> frozenset[str]:
    """Names (and aliases) of a model's array parameters."""
    names = set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if get_origin(annotation) is list:
            names.add(info.alias or name)
    return frozenset(names)


def _signable(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_body(body: bytes) -> dict[str, Any]:
    """A JSON object, or `{}` for an empty body."""
    if not body.strip():
        return {}
    try:
        data = json_text.loads(body, parse_int=JsonNumber, parse_float=JsonNumber)
    except json_text.NotJson as error:
        field = error.member or "body"
        raise RequestNotValid(f"The body is refused: {field} {error}.", [ErrorDetail(field, str(error))]) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise RequestNotValid("The body is not valid JSON.",
                              [ErrorDetail("body", f"not valid JSON: {error}")]) from None
    if not isinstance(data, dict):
        raise RequestNotValid("The body must be a JSON object of parameters.",
                              [ErrorDetail("body", "must be a JSON object")])
    return data


def collect(
    *, method: str, raw_query: str, body: dict[str, Any], header_key: str | None,
    array_params: frozenset[str],
) -> RawParams:
    """Merge query and body into one parameter dict; scalars given twice are refused."""
    values: dict[str, Any] = {}
    pairs: list[tuple[str, str]] = []
    repeated: set[str] = set()
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        pairs.append((name, value))
        if name in array_params:
            values.setdefault(name, []).append(value)
        elif name in values:
            repeated.add(name)
        else:
            values[name] = value
    if repeated - set(CREDENTIAL_PARAMS):
        names = sorted(repeated - set(CREDENTIAL_PARAMS))
        raise RequestNotValid(
            f"Parameters given more than once: {', '.join(names)}.",
            [ErrorDetail(n, "given more than once; only array parameters may repeat") for n in names])
    for name, value in body.items():
        if value is None:
            continue  # a JSON null is the same as leaving the parameter out
        if isinstance(value, list):
            pairs.extend((name, _signable(item)) for item in value)
        else:
            pairs.append((name, _signable(value)))
        values[name] = value
    query_key = _str_or_none(values.pop("access_key", None))
    access_key = header_key or query_key
    signature = _str_or_none(values.pop("signature", None))
    return RawParams(values, pairs, raw_query, method, access_key, signature)


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        value = value[-1] if value else None
    return None if value is None else str(value)
