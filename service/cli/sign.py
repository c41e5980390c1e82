"""`screenshot-service sign`: a signed GET link, its parameters checked as the endpoint checks them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any


def add_sign_command(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The `sign` command, among `commands`."""
    signer = command(
        commands, "sign", "print a signed link: sign --key KEY --signing-key SECRET name=value [name=value ...]",
        description="Print a signed GET link to /take (or /animate). Parameters are name=value; repeat a name "
        "for each element of an array (hide_selectors=.a hide_selectors=.b). They are checked as the endpoint "
        "checks them: a link it would refuse is not signed. docs/using.md's Signed requests section gives the "
        "rules, for signing in other languages.")
    signer.add_argument("--key", required=True, help="the organisation's access key (part of the link)")
    signer.add_argument("--signing-key", required=True, help="the organisation's signing key (never in the link)")
    signer.add_argument("--endpoint", choices=["take", "animate"], default="take")
    signer.add_argument("--base-url", help="how clients reach the service (default: SCREENSHOT_PUBLIC_BASE_URL, "
                        "else http://SCREENSHOT_HOST:SCREENSHOT_PORT)")
    signer.add_argument("parameters", nargs="*", metavar="name=value", help="a parameter of the link; repeat a "
                        "name for each element of an array")


def cmd_sign(args: argparse.Namespace, extra: list[str]) -> int:
    """Print a signed GET link: the canonical parameters (access_key included) and their signature. The
    parameters are checked as the endpoint would check them first: a link that would be refused is not signed."""
    from animate.options import AnimateOptions, parse_animate_options
    from render.contract.errors import RequestNotValid
    from render.contract.options import TakeOptions, parse_take_options
    from service.params import list_fields
    from service.settings import ServiceSettings
    from service.signatures import canonical_message, sign

    model, parse = ((AnimateOptions, parse_animate_options) if args.endpoint == "animate"
                    else (TakeOptions, parse_take_options))
    arrays = list_fields(model)
    pairs = [("access_key", args.key)]
    values: dict[str, Any] = {}
    for item in extra:
        name, separator, value = item.partition("=")
        if not separator or not name:
            print(f"error: {item!r} is not name=value (repeat a name for each element of an array)", file=sys.stderr)
            return 2
        pairs.append((name, value))
        if name in arrays:
            values.setdefault(name, []).append(value)
        else:
            values[name] = value
    try:
        parse(values)
    except RequestNotValid as error:
        for detail in error.details:
            print(f"error: {detail.field}: {detail.message}", file=sys.stderr)
        print(f"error: not signed: /{args.endpoint} would refuse these parameters", file=sys.stderr)
        return 2
    message = canonical_message(pairs)
    base = (args.base_url or ServiceSettings().base_url).rstrip("/")
    print(f"{base}/v1/screenshot/{args.endpoint}?{message}&signature={sign(message, args.signing_key)}")
    return 0


