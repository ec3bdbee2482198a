"""What every command that talks to the server starts from: the context the command line, the
environment and the config file name, and a client for it."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

import httpx

from cpctl import config
from cpctl.client import Client


@dataclass
class Session:
    args: argparse.Namespace
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    transport: httpx.BaseTransport | None = None  # tests answer in place of a server

    def config_path(self) -> config.Path:
        return config.config_path(os.environ)

    def load(self) -> config.Config:
        return config.load(self.config_path())

    def client(self) -> Client:
        ctx = config.resolve(self.load(), context=getattr(self.args, "context", None), env=os.environ)
        return Client(ctx.server, ctx.token, timeout=getattr(self.args, "request_timeout", 15.0),
                      transport=self.transport)
