"""Helpers for tests that attack a server from a second loopback address.

All of 127.0.0.0/8 is loopback on Linux, so a socket bound to 127.0.0.2 reaches a server on
127.0.0.1 from a different source address, as a second host would.
"""

from __future__ import annotations

import logging
import socket

from tests.conftest import skip_unless_ci

ATTACKER = "127.0.0.2"


def attacker_address() -> str:
    """127.0.0.2, or a skip (a failure under CI) where it is not a local address."""
    try:
        with socket.socket() as probe:
            probe.bind((ATTACKER, 0))
    except OSError:
        skip_unless_ci(f"{ATTACKER} is not a local address here (Linux has all of 127/8 on lo)")
    return ATTACKER


class Recorder(logging.Handler):
    """Keeps every record that reaches it (after the logger's filters)."""

    def __init__(self, level: int = logging.DEBUG) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
