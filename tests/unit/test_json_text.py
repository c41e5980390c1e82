"""JSON a client sent is measured before it is read: nesting counted without recursion (brackets in strings and
escapes left out), NaN and Infinity refused, long integers never made Python ints."""

from __future__ import annotations

import json

import pytest

from render.contract.json_text import MOST_NESTING, NotJson, depth, integer, loads, nesting


@pytest.mark.parametrize(("text", "levels"), [
    ("1", 0), ("[]", 1), ('{"a": [1, {"b": []}]}', 4), ('["]]]]", "[[[["]', 1), ('["\\"[[", [[]]]', 3),
    ("[" * 5000 + "]" * 5000, 5000), ('{"a\\\\": [{}]}', 3)])
def test_nesting_counts_levels_not_brackets_in_strings(text: str, levels: int) -> None:
    assert nesting(text) == levels == nesting(text.encode())
    if levels < 900:
        assert depth(json.loads(text)) == levels


def test_what_nests_past_the_bound_or_is_not_json_s_number_is_refused() -> None:
    assert loads("[" * MOST_NESTING + "]" * MOST_NESTING) is not None
    with pytest.raises(NotJson, match="nests deeper than 100"):
        loads("[" * (MOST_NESTING + 1) + "]" * (MOST_NESTING + 1))
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(NotJson, match=f"holds {constant}"):
            loads(f'{{"a": [{constant}]}}')
    for text in ('["\\ud800"]', '{"\\udfff": 1}', '["\\ud83d x"]'):
        with pytest.raises(NotJson, match="lone surrogate"):
            loads(text)
    assert loads('["\\ud83d\\ude00", "\\\\ud800"]') == ["\U0001f600", "\\ud800"]  # a pair; an escaped backslash
    # Many brackets side by side are not deep.
    assert loads("[" + ",".join(["[]"] * 5000) + "]") == [[]] * 5000


def test_a_long_integer_is_read_as_a_float_never_a_python_int() -> None:
    assert integer("12") == 12 and isinstance(integer("9" * 100), int)
    assert integer("9" * 5000) == float("inf") and loads("9" * 5000) == float("inf")
    assert loads("-" + "9" * 400) == float("-inf")
