"""Checks :func:`secfindings.spark.register` and :func:`secfindings.spark.read` make in the
calling process, so that what would fail inside Spark's tasks (a traceback wrapped in Spark's
``PYTHON_DATA_SOURCE_ERROR``) is one line before Spark runs anything:

- the Python that a local session starts for its workers (``$PYSPARK_PYTHON``, else
  ``python3`` on the ``PATH``) must import secfindings; with a virtualenv that is not activated
  it is another Python, and Spark's first task fails with ``No module named 'secfindings'``;
- with ``budget_required``, the shared budget's store must be usable now (the schema may come
  from the cache, so the read itself may send nothing before Spark plans it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import Any

from secfindings.errors import TransportError
from secfindings.spark import _options
from secfindings.spark._options import ReadOptions

__all__ = ["store_ready", "workers_python"]

#: What was found of each worker Python (its path as given): None when it imports secfindings,
#: else why not.
_SEEN: dict[str, str | None] = {}
_LOCK = threading.Lock()


def _problem(python: str) -> str | None:
    """None when ``python`` runs and imports secfindings, else what went wrong."""
    found = shutil.which(python)
    if found is None:
        return "which is not found"
    if os.path.abspath(found) == os.path.abspath(sys.executable):
        return None
    try:
        done = subprocess.run(
            [found, "-c", "import secfindings"], capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"which does not run ({type(exc).__name__})"
    return None if done.returncode == 0 else f"({found}), which cannot import secfindings"


def workers_python(spark: Any) -> None:
    """Raise ImportError (one line) when a local session's Python workers cannot import
    secfindings; a session on a cluster, or one without a SparkContext here (Spark Connect), is
    not checked (its workers are elsewhere)."""
    try:
        context = spark.sparkContext
        python = str(context.pythonExec)
        master = str(context.master)
    except Exception:  # Spark Connect has no SparkContext in this process
        return
    if not master.startswith("local"):
        return
    with _LOCK:
        if python not in _SEEN:
            _SEEN[python] = _problem(python)
        problem = _SEEN[python]
    if problem is not None:
        raise ImportError(
            f"secfindings.spark: this Spark session's Python workers run {python!r} {problem}: "
            f"start the session with PYSPARK_PYTHON={sys.executable} in the environment "
            "(or activate the virtualenv that has secfindings)"
        )


def store_ready(read: ReadOptions) -> None:
    """With ``budget_required``, raise TransportError (one line, no password) when the shared
    budget's store cannot be used now."""
    if not read.settings.get("budget_required"):
        return
    seen = _options.client_for(read).budget()
    if seen.error is not None:
        raise TransportError(f"secfindings data source: {seen.error}")
