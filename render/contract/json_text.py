"""JSON a client sent, read only once it is known to be safe to read: nested at most MOST_NESTING levels (Python's
reader recurses, and so does every check after it) and made of JSON's own values (no NaN or Infinity, which
Python's reader takes by default and which no other JSON reader would; no half of a surrogate pair, which no
UTF-8 writer downstream can encode). Bodies and JSON written in a query
string alike."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

# Levels of arrays and objects, the outermost included. A request's own structure is a few levels deep; a
# vision_response_schema nests at most json_schema.MAX_DEPTH schemas, two levels each (`properties`, then the name).
MOST_NESTING = 100
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, quotes and escapes included
LONGEST_INTEGER = 100  # digits
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # an escape of half a surrogate pair (a whole pair has two)
_OPENING = frozenset(b"[{")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


class NotJson(ValueError):
    """Why a text is refused, in words for the caller; `member`: the object's member whose value is at fault,
    when that is known (the text's own field, else)."""

    def __init__(self, message: str, member: str | None = None) -> None:
        super().__init__(message)
        self.member = member


def nesting(text: str | bytes) -> int:
    """How many levels of arrays and objects `text` nests at its deepest, without recursion (brackets inside
    strings do not count; the strings are dropped first, in C, so a large body costs little). Text that is not
    JSON gets a figure too; its reader refuses it."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    depth = deepest = 0
    for bracket in _STRING.sub(b"", data).translate(None, _NOT_BRACKETS):
        if bracket in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _deep_member(data: bytes) -> str | None:
    """The member of a top-level object whose value nests past MOST_NESTING, read byte by byte (only for a text
    already found too deep); None when the text is no object."""
    level, in_string, escaped, start = 0, False, False, 0
    last: bytes | None = None
    member: bytes | None = None
    for at, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # the closing quote
                in_string, last = False, data[start:at]
        elif byte == 0x22:
            in_string, start = True, at + 1
        elif byte == 0x3A and level == 1:  # a colon in the top-level object: the string before it names the member
            member = last
        elif byte in _OPENING:
            level += 1
            if level > MOST_NESTING:
                if member is None or data.lstrip()[:1] != b"{":
                    return None
                try:
                    return str(json.loads(b'"' + member + b'"'))
                except ValueError:
                    return member.decode("utf-8", "replace")
        elif byte in b"]}":
            level -= 1
    return None


def depth(value: Any) -> int:
    """How many levels of lists and dicts `value` nests at its deepest, without recursion."""
    deepest, waiting = 0, [(value, 1)]
    while waiting:
        item, level = waiting.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            waiting.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _no_constant(name: str) -> Any:
    raise NotJson(f"holds {name}, which is not a JSON number")


def integer(text: str) -> int | float:
    """A JSON integer of more than LONGEST_INTEGER digits read as a float (inf past about 308): no rule of a schema
    here takes that many, so the schema refuses it naming its field, and Python never makes an int of it (it
    refuses past 4,300 digits, and takes time growing with the square of the digits up to there)."""
    return int(text) if len(text) <= LONGEST_INTEGER else float(text)


def loads(text: str | bytes, *, parse_int: Callable[[str], Any] = integer,
          parse_float: Callable[[str], Any] | None = None) -> Any:
    """`json.loads`, refusing (NotJson) what nests deeper than MOST_NESTING and NaN or Infinity, long integers read
    by `integer`; what is not JSON raises json's own ValueError."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") > MOST_NESTING and nesting(data) > MOST_NESTING:
        raise NotJson(f"nests deeper than {MOST_NESTING} levels of arrays and objects", _deep_member(data))
    value = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=_no_constant)
    if _SURROGATE.search(data) and not _unicode(value):
        raise NotJson("holds a lone surrogate (an escape such as \\ud800 that is half of a pair), which is not a "
                      "Unicode character")
    return value


def _unicode(value: Any) -> bool:
    """Whether every string of `value` (keys too) is Unicode text: JSON's escapes can write half a surrogate pair,
    which nothing downstream can encode."""
    waiting = [value]
    while waiting:
        item = waiting.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            waiting.extend(item.keys())
            waiting.extend(item.values())
        elif isinstance(item, list):
            waiting.extend(item)
    return True
