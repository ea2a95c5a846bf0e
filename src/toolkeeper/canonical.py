"""Canonical JSON (RFC 8785) and digests: what approvals, previews and keys bind to."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import rfc8785


class NotCanonicalizable(ValueError):
    """The value cannot be expressed as JSON (NaN, huge ints, non-string keys, strings that
    are not valid Unicode…); ``pointer`` is the JSON pointer of the culprit when known."""

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(message)
        self.pointer = pointer


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical form.

    Fast path: orjson with sorted keys equals JCS for the values agents send (strings,
    ints within ±2**53, bools, null, nested objects/arrays, no floats); anything else
    goes through the reference implementation.
    """
    try:
        if _simple(value, 0):
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError) as exc:
        pointer = invalid_unicode(value)
        if pointer is not None:
            raise NotCanonicalizable("a string is not valid Unicode (a lone surrogate)",
                                     pointer) from exc
        raise NotCanonicalizable(str(exc)) from exc


def invalid_unicode(value: Any, pointer: str = "", depth: int = 0) -> str | None:
    """The JSON pointer of the first string (key or value) in ``value`` that cannot be
    encoded as UTF-8 — a lone surrogate such as ``"\\ud800"`` — or ``None``."""
    if isinstance(value, str):
        return None if value.isascii() or _encodes(value) else pointer
    if depth > 64:
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{pointer}/{escape_pointer(k) if isinstance(k, str) else k}"
            if isinstance(k, str) and not (k.isascii() or _encodes(k)):
                return here
            found = invalid_unicode(v, here, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = invalid_unicode(v, f"{pointer}/{i}", depth + 1)
            if found is not None:
                return found
    return None


def escape_pointer(token: str) -> str:
    """One JSON pointer reference token (RFC 6901: ``~`` → ``~0``, ``/`` → ``~1``), with
    characters that are not valid Unicode shown as backslash escapes."""
    if not (token.isascii() or _encodes(token)):
        token = token.encode("utf-8", "backslashreplace").decode("utf-8")
    return token.replace("~", "~0").replace("/", "~1")


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        for k, v in value.items():
            if type(k) is not str or not k.isascii():
                return False
            tv = type(v)  # strings and safe ints judged here: no call per argument
            if depth < 64 and (tv is str or (tv is int and -_MAX_SAFE < v < _MAX_SAFE)):
                continue
            if not _simple(v, depth + 1):
                return False
        return True
    if t is list:
        return all(_simple(v, depth + 1) for v in value)
    return False


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical form."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()
