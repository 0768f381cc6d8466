"""neon's logger: `from neonlike import logger; logger.display('...')`.

neon's package logger ('neon', here 'neonlike') with a `display` method logging at neon's
DISPLAY level (41, above ERROR, so shown whatever the configured level short of CRITICAL). neon
patched `display` onto every `logging.Logger` and called `logging.basicConfig` when imported;
neonlike does neither: the method is this logger's own, and with no handler configured Python's
last-resort handler prints the message to stderr.
"""
from __future__ import annotations

import logging
import types
from typing import Any

DISPLAY_LEVEL_NUM = 41


def _display(self: logging.Logger, message: Any, *args: Any, **kwargs: Any) -> None:
    if self.isEnabledFor(DISPLAY_LEVEL_NUM):
        self._log(DISPLAY_LEVEL_NUM, message, args, **kwargs)


def _make() -> logging.Logger:
    logging.addLevelName(DISPLAY_LEVEL_NUM, "DISPLAY")
    log = logging.getLogger("neonlike")
    log.display = types.MethodType(_display, log)  # type: ignore[attr-defined]
    return log


logger = _make()

__all__ = ["logger", "DISPLAY_LEVEL_NUM"]
