"""Logging: records go to the standard ``logging`` logger ``secfindings`` (and its children).

``SECFINDINGS_LOG=debug`` or ``=info`` turns them on with a stderr handler. Tokens and JWTs are
never part of a record.
"""

from __future__ import annotations

import logging
import os

from secfindings import _native

LOGGER_NAME = "secfindings"
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_from_env() -> None:
    """Apply ``SECFINDINGS_LOG`` once, at import."""
    wanted = os.environ.get("SECFINDINGS_LOG", "").strip().lower()
    level = _LEVELS.get(wanted)
    if level is None:
        return
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    sync_levels()


def sync_levels() -> None:
    """Make the Rust side re-read Python's logging levels (they are cached for speed)."""
    _native.reset_log_cache()
