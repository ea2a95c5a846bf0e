"""httpx without its command-line client until someone runs it.

``import httpx`` also imports ``httpx._main``, its command-line client, whenever click, rich
and pygments are installed — and they are wherever toolkeeper is (typer and rich for our own
CLI). A server worker would carry them for nothing: ~6 MB of memory and ~10 ms of start-up per
process. Importing this module (``toolkeeper/__init__`` does, first) puts a stand-in in its
place whose ``main`` imports the real client when it is called, so ``httpx.main`` still works.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAME = "httpx._main"


def _main(*args: Any, **kwargs: Any) -> Any:
    """``httpx.main``: the real command-line client, imported now."""
    if isinstance(sys.modules.get(_NAME), _Deferred):
        del sys.modules[_NAME]
    return importlib.import_module(_NAME).main(*args, **kwargs)


class _Deferred(types.ModuleType):
    """Stands in for ``httpx._main`` until its ``main`` is called."""

    main = staticmethod(_main)


def defer_httpx_cli() -> None:
    """Install the stand-in, unless httpx (or its client) is already imported."""
    if "httpx" in sys.modules or _NAME in sys.modules:
        return
    sys.modules[_NAME] = _Deferred(_NAME)


defer_httpx_cli()
