"""Redaction of secret values from anything a call returns, logs or audits (SPEC §2, §8).

What is replaced by ``"***"``, for each secret value:

- the exact value;
- its base64 encodings (standard and URL-safe, with or without ``=`` padding);
- the stable core of its base64 encoding when it sits inside a longer encoded string at any
  byte offset, so ``Basic base64("user:" + password)`` echoed back by an upstream does not
  leak the password (only for values of 8+ characters, whose core is long enough not to
  match ordinary text by accident).

Values shorter than 4 characters are ignored: replacing every ``"yes"`` or ``"1"`` in an
output would destroy it while protecting nothing (such a value is guessable anyway).
"""

from __future__ import annotations

import base64
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any

MASK = "***"
CALL_SECRETS: ContextVar[Sequence[str]] = ContextVar("toolkeeper_call_secrets", default=())
"""The values the running call has resolved so far (set by the execute step while the tool
runs), so that a log record made meanwhile is redacted of them too. Not shared state: each
call's task, and the threads it hands work to (``asyncio.to_thread``), sees its own."""
MIN_SECRET_LEN = 4


class _LiveSecrets:
    """Secrets the gateway made at run time, outside any one call (upstream OAuth access
    tokens, ``toolkeeper.identity.upstream``): log records are redacted of the newest
    ``limit`` of them (``toolkeeper.observability.logs``), whatever call is running."""

    def __init__(self, limit: int = 256) -> None:
        self._limit = limit
        self._values: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._snapshot: tuple[str, ...] = ()

    def add(self, value: str) -> None:
        with self._lock:
            if value in self._values:  # in use again: the last to be dropped
                self._values.move_to_end(value)
                return
            self._values[value] = None
            while len(self._values) > self._limit:
                self._values.popitem(last=False)
            self._snapshot = tuple(self._values)

    def values(self) -> tuple[str, ...]:
        return self._snapshot


LIVE_SECRETS = _LiveSecrets()
_MIN_CORE_SOURCE_LEN = 8
_MIN_CORE_LEN = 8


def _b64_cores(raw: bytes) -> set[str]:
    """The base64 characters determined by ``raw`` alone, for each of the 3 byte offsets."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start_bits, end_bits = 8 * offset, 8 * (offset + len(raw))
        first = -(-start_bits // 6)  # first 6-bit group that starts inside ``raw``
        last = (end_bits - 6) // 6  # last group that ends inside ``raw``
        core = encoded[first : last + 1]
        if len(core) >= _MIN_CORE_LEN:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def _forms(value: str) -> set[str]:
    """Every string that reveals ``value`` and is replaced by the mask."""
    raw = value.encode("utf-8")
    std = base64.b64encode(raw).decode("ascii")
    url = base64.urlsafe_b64encode(raw).decode("ascii")
    forms = {value, std, url, std.rstrip("="), url.rstrip("=")}
    if len(value) >= _MIN_CORE_SOURCE_LEN:
        forms |= _b64_cores(raw)
    return {form for form in forms if len(form) >= MIN_SECRET_LEN}


class Redactor:
    """Replaces secret values (and their base64 forms) with ``"***"`` in text and JSON data.

    All forms of all values are compiled into one regex alternation, longest first so a
    value that contains another is masked whole; it is rebuilt only when the set changes.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self.set_values(values)

    @property
    def values(self) -> frozenset[str]:
        """The secret values currently redacted (short ones excluded)."""
        return self._values

    def set_values(self, values: Iterable[str]) -> None:
        """Redact exactly ``values`` from now on; a no-op when the set is unchanged."""
        wanted = frozenset(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN)
        if wanted == self._values:
            return
        forms: set[str] = set()
        for value in wanted:
            forms |= _forms(value)
        ordered = sorted(forms, key=lambda form: (-len(form), form))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._values = wanted

    def union(self, values: Iterable[str]) -> Redactor:
        """A redactor for this set plus ``values`` (``self`` when nothing is added)."""
        extra = frozenset(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN)
        if extra <= self._values:
            return self
        return Redactor(self._values | extra)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact_text(self, text: str) -> str:
        """``text`` with every secret form replaced by the mask."""
        if self._pattern is None:
            return text
        text, count = self._pattern.subn(MASK, text)
        while count:  # a mask next to leftovers can spell a secret that contains "*"
            text, count = self._pattern.subn(MASK, text)
        return text

    def redact(self, obj: Any) -> Any:
        """A copy of ``obj`` with secrets masked in strings, dict keys and numbers.

        dicts, lists and tuples are walked (tuples come back as lists, the JSON shape);
        ``None`` and booleans pass; numbers are masked whole if their text is a secret; any
        other object is stringified first. With no secrets, ``obj`` is returned unchanged.
        """
        if self._pattern is None:
            return obj
        return self._walk(obj)

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact_text(obj)
        if obj is None or isinstance(obj, bool):
            return obj
        if isinstance(obj, dict):
            return {self._key(k): self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(item) for item in obj]
        if isinstance(obj, int | float):
            text = str(obj)
            return obj if self.redact_text(text) == text else MASK
        return self.redact_text(str(obj))

    def _key(self, key: Any) -> Any:
        if key is None or isinstance(key, str | int | float):
            return self._walk(key)
        return self.redact_text(str(key))  # tuples and objects: keep the key hashable
