"""What went wrong, and the exit code a script sees for it. Every error cpctl prints is one of
these; the exit codes are part of its interface (docs/cli.md)."""

from __future__ import annotations

from typing import Any

DONE = 0          # the command did what it was asked
REFUSED = 1       # the server answered no (4xx): its text is printed as it sent it
USAGE = 2         # the command line or the config file is wrong (nothing was sent)
TIMED_OUT = 3     # --wait gave up before the server reported the state waited for
UNREACHABLE = 4   # no usable answer: the network, a server error (5xx), or an API version cpctl does not speak


class CpctlError(Exception):
    exit_code = REFUSED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CpctlError):
    exit_code = USAGE


class Refused(CpctlError):
    """A 4xx answer. ``message`` is the server's ``detail`` as sent."""

    exit_code = REFUSED

    def __init__(self, message: str, *, status: int, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class Unreachable(CpctlError):
    exit_code = UNREACHABLE


class TimedOut(CpctlError):
    exit_code = TIMED_OUT
