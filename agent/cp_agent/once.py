"""Say a thing once: a missing series, a failing reader. A problem that goes
away and comes back is said again (``clear``), so the log shows each episode
without repeating itself every sample."""

from __future__ import annotations

import logging
import threading


class Once:
    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def say(self, key: str, level: int, msg: str, *args: object) -> bool:
        """Log ``msg`` unless ``key`` was said since it was last cleared; True when logged."""
        with self._lock:
            if key in self._said:
                return False
            self._said.add(key)
        self._log.log(level, msg, *args)
        return True

    def clear(self, key: str) -> bool:
        """Forget ``key``; True when it had been said (the problem is over)."""
        with self._lock:
            if key in self._said:
                self._said.discard(key)
                return True
            return False

    def said(self, key: str) -> bool:
        with self._lock:
            return key in self._said
