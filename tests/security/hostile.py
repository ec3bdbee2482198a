"""Hostile request bodies, built from a valid one: each is a (name, body) the server must refuse
with a 4xx naming the problem (or, for duplicated keys, read by the one documented rule)."""

from __future__ import annotations

import json
from typing import Any

MB = 1024 * 1024
NESTED = b"[" * 10_000 + b"]" * 10_000


def encode(value: Any) -> bytes:
    return json.dumps(value).encode()


def replace_value(body: bytes, key: str, raw: bytes) -> bytes:
    """``body`` with the (first) value of ``"key"`` replaced by the raw JSON text ``raw``."""
    text = body.decode()
    marker = f'"{key}": '
    start = text.index(marker) + len(marker)
    end = start
    depth = 0
    in_str = False
    while end < len(text):  # the end of the old value: a comma or closing bracket at depth 0
        ch = text[end]
        if in_str:
            in_str = ch != '"' or text[end - 1] == "\\"
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        end += 1
    return body[:start] + raw + text[end:].encode()


def duplicate_key(body: bytes, key: str, first: bytes, last: bytes) -> bytes:
    """``body`` with ``"key": first, "key": last`` where the key was."""
    replaced = replace_value(body, key, b"\x00")
    return replaced.replace(b"\x00", first + b', "' + key.encode() + b'": ' + last, 1)


def spoiled(valid: bytes, *, number_key: str, int_key: str, nest_key: str, text: bytes) -> list[tuple[str, bytes]]:
    """Every hostile body of the list, made from one valid body: ``number_key`` names a numeric
    field, ``int_key`` an integer field, ``nest_key`` a field that may hold an object, ``text`` a
    quoted string in the body to spoil with invalid UTF-8."""
    return [
        ("truncated", valid[: len(valid) // 2]),
        ("nested", NESTED),
        ("nested in a field", replace_value(valid, nest_key, NESTED)),
        ("10 MB of whitespace", b" " * (10 * MB)),
        ("1 MB of whitespace", b" \n\t\r" * (MB // 4)),
        ("invalid UTF-8", valid.replace(text, text[:-1] + b"\xff\xfe\"")),
        ("NaN", replace_value(valid, number_key, b"NaN")),
        ("Infinity", replace_value(valid, number_key, b"Infinity")),
        ("1e999", replace_value(valid, number_key, b"1e999")),
        ("duplicated keys", duplicate_key(valid, int_key, b"1", b"-1")),
        ("2**64", replace_value(valid, int_key, str(2**64).encode())),
        ("10,000 digits", replace_value(valid, int_key, b"9" * 10_000)),
    ]
