"""Validation that reports every problem at once: a request model's errors as `field: message` details,
cross-field rules included, raised as one `RequestNotValid`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from render.contract.errors import ErrorDetail, RequestNotValid
from render.contract.values import ModelT


def all_or_none(options: BaseModel, label: str, names: tuple[str, ...]) -> list[ErrorDetail]:
    """Problems when some but not all of `names` are given (a clip, a geolocation)."""
    given = [n for n in names if getattr(options, n) is not None]
    if given and len(given) != len(names):
        missing = [n for n in names if n not in given]
        return [ErrorDetail(n, f"{label} needs all of {', '.join(names)}") for n in missing]
    return []


class CrossFieldError(ValueError):
    """Raised inside the model validator to carry several field problems out of pydantic."""

    def __init__(self, problems: list[ErrorDetail]) -> None:
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = problems


def validation_details(error: ValidationError) -> list[ErrorDetail]:
    """Turn pydantic's errors into `field: message` details, one per problem."""
    details: list[ErrorDetail] = []
    for item in error.errors(include_url=False):
        ctx_error = (item.get("ctx") or {}).get("error")
        if isinstance(ctx_error, CrossFieldError):
            details.extend(ctx_error.problems)
            continue
        field = ".".join(str(part) for part in item["loc"]) or "request"
        if item["type"] == "extra_forbidden":
            message = "unknown parameter"
        else:
            message = item["msg"].removeprefix("Value error, ")
        details.append(ErrorDetail(field, message))
    return details


# Names the hosted API's official SDKs send for parameters of ours (docs/migrating.md).
SDK_ALIASES = {"openai_api_key": "vision_provider_api_key"}


def with_sdk_names_resolved(params: dict[str, Any]) -> dict[str, Any]:
    """`params` with the SDKs' names (SDK_ALIASES) turned into ours; both names at once is an error."""
    if not SDK_ALIASES.keys() & params.keys():
        return params
    resolved = dict(params)
    for alias, name in SDK_ALIASES.items():
        if alias in resolved:
            if name in resolved:
                raise RequestNotValid(f"Invalid parameters: {alias}: is another name for {name}; send one of them",
                                      [ErrorDetail(alias, f"is another name for {name}; send one of them")])
            resolved[name] = resolved.pop(alias)
    return resolved


def validate_all(model: type[ModelT], params: dict[str, Any]) -> ModelT:
    """Validate `params` into `model`, reporting every problem at once as `RequestNotValid`.

    Pydantic skips the cross-field rules when a field is invalid; to still report them, the
    parameters are validated a second time without the invalid fields (their rules are skipped).
    """
    params = with_sdk_names_resolved(params)
    try:
        return model.model_validate(params)
    except ValidationError as error:
        details = validation_details(error)
        field_level = not any(isinstance((item.get("ctx") or {}).get("error"), CrossFieldError)
                              for item in error.errors(include_url=False))
    failed = {d.field.split(".")[0] for d in details}  # a list's item (`wait_until.0`): the list
    rest = {name: value for name, value in params.items() if name not in failed}
    if field_level and len(rest) < len(params):
        try:
            model.model_validate(rest)
        except ValidationError as error:
            details += [d for d in validation_details(error) if d.field.split(".")[0] not in failed]
    summary = "; ".join(f"{d.field}: {d.message}" for d in details)
    raise RequestNotValid(f"Invalid parameters: {summary}", details) from None
