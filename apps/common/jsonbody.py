"""One reading of JSON request bodies for the whole API: the telemetry ingest and every
DRF endpoint (``JSONBodyParser``) decode with the same msgspec decoder and follow the
same rules (docs/security.md):

- duplicated keys in an object: the last one wins (as RFC 8259 parsers commonly do;
  documented instead of refused);
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON: refused;
- a number too large for a double (``1e999``): refused as that field's error
  (``request_interval_s: must be a finite number``); an integer of thousands of digits:
  refused;
- invalid UTF-8: refused with the byte position;
- nesting deeper than the interpreter's recursion allowance (several hundred levels;
  no body the API takes nests more than five): refused.

Each refusal is ``BadJSON`` with a message naming the problem; callers turn it into a 400
(``apps/common/parsers.py`` for DRF, ``apps/telemetry/ingest/decoder.py`` for the ingest).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec


class BadJSON(Exception):
    """The body is not JSON this API reads; the message says why and where. ``path`` names the
    offending value when there is one (``items[0].cpu_clock_ghz``): callers report it as that
    field's error, in the API's one error shape."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.message = message
        self.path = path


class _OutOfRange(Exception):
    pass


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999: no double holds it
        raise _OutOfRange
    return value


_decoder = msgspec.json.Decoder(float_hook=_finite)
_lenient = msgspec.json.Decoder(float_hook=float)  # only to find where an out-of-range number is


def load_json(body: bytes) -> Any:
    """The body as plain Python values, or ``BadJSON``."""
    try:
        return _decoder.decode(body)
    except _OutOfRange:
        raise BadJSON("must be a finite number", _infinite_at(body)) from None
    except msgspec.ValidationError as exc:  # an integer of thousands of digits
        raise BadJSON(f"the body is not valid JSON: {_path(exc)}") from None
    except msgspec.DecodeError as exc:
        raise BadJSON(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadJSON("the body is not valid JSON: objects and arrays are nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise BadJSON(f"the body is not valid UTF-8: {exc.reason} at byte {exc.start} of a string") from None


def _infinite_at(body: bytes) -> str:
    """The path of the first number too large for a double, e.g. ``node_samples[0].load1``
    ("non_field_errors" for a bare number)."""
    stack: list[tuple[str, Any]] = [("", _lenient.decode(body))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and math.isinf(value):
            return path or "non_field_errors"
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return "non_field_errors"


def _path(exc: msgspec.ValidationError) -> str:
    """msgspec's "Integer value out of range - at `$[0]`" as "integer value out of range at [0]"."""
    text = str(exc)
    message, sep, where = text.partition(" - at `")
    if not sep:
        return text
    where = where.rstrip("`").removeprefix("$").removeprefix(".")
    return f"{message[:1].lower()}{message[1:]} at {where or 'the top level'}"
