"""The reference pages of the documentation site, generated from the code at build time.

``PAGES`` maps each page's path under ``docs/`` to the function that writes it;
``docs/hooks.py`` adds them to every ``mkdocs build``, and tests/docs/ checks that each
lists everything its source defines. Nothing generated is committed, so nothing can drift.
"""

from __future__ import annotations

from collections.abc import Callable

from . import builtins, cli, config, metrics, reasons, rest

PAGES: dict[str, Callable[[], str]] = {
    "reference/reasons.md": reasons.render,
    "reference/rest.md": rest.render,
    "reference/cli.md": cli.render,
    "reference/config.md": config.render,
    "reference/metrics.md": metrics.render,
    "reference/builtins.md": builtins.render,
}

__all__ = ["PAGES"]
