"""Canonical JSON (RFC 8785) and digests: what approvals, previews and keys bind to."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import rfc8785


class NotCanonicalizable(ValueError):
    """The value cannot be expressed as JSON (NaN, huge ints, non-string keys…)."""


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical form.

    Fast path: orjson with sorted keys equals JCS for the values agents send (strings,
    ints within ±2**53, bools, null, nested objects/arrays, no floats); anything else
    goes through the reference implementation.
    """
    if _simple(value, 0):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError) as exc:
        raise NotCanonicalizable(str(exc)) from exc


_MAX_SAFE = 2**53


def _simple(value: Any, depth: int) -> bool:
    if depth > 64:
        return False
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return bool(-_MAX_SAFE < value < _MAX_SAFE)
    if t is float:
        # In this range, for non-integral values, orjson's shortest round-trip digits are
        # exactly ECMAScript's Number::toString (RFC 8785 §3.2.2.3); outside it (exponent
        # forms, integral floats such as 5.0) the reference implementation decides.
        a = abs(value)
        return 1e-4 <= a < 1e16 and not value.is_integer()
    if t is dict:
        # orjson sorts by UTF-8 bytes, JCS by UTF-16 code units: equal for BMP-only keys.
        return all(
            type(k) is str and k.isascii() and _simple(v, depth + 1) for k, v in value.items()
        )
    if t is list:
        return all(_simple(v, depth + 1) for v in value)
    return False


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical form."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()
