"""Access and signing keys: safe to paste anywhere."""

from __future__ import annotations

import re

from service.organisations import new_key


def test_keys_are_letters_and_digits_so_no_command_line_reads_them_as_options() -> None:
    keys = {new_key() for _ in range(2000)}
    assert len(keys) == 2000
    assert all(re.fullmatch(r"[A-Za-z0-9]{32}", key) for key in keys)
