"""How the console shows values, for the browser tests' assertions."""

from __future__ import annotations


def short(ident: str) -> str:
    """An id as the console shows it (app.js ``shortText``): both ends, so the ids one
    server makes (a shared per-process prefix, then a counter) read apart."""
    return f"{ident[:6]}…{ident[-6:]}" if len(ident) > 14 else ident
