"""Content of the ``filesystem`` built-in: decoding what an agent sends, text or base64
out, and the diff a preview shows."""

from __future__ import annotations

import base64
import binascii
import difflib
from typing import Any

from toolkeeper.model.reasons import Reason
from toolkeeper.providers.base import ToolContext

_DIFF_LINES = 200


def decoded(ctx: ToolContext, request: dict[str, Any], cap: int) -> bytes:
    """The bytes of ``content`` (UTF-8 or base64), refused beyond ``cap`` bytes."""
    content = request.get("content")
    if not isinstance(content, str):
        ctx.fail(Reason.INVALID_ARGUMENTS, "content must be a string")
    if len(content) > cap * 4 + 4:  # cheap bound before encoding or decoding
        ctx.deny(Reason.FILE_TOO_LARGE, f"content is larger than max_write_bytes {cap}")
    if request.get("encoding", "utf-8") == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            ctx.fail(Reason.INVALID_ARGUMENTS, "content is not valid base64")
    else:
        data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > cap:
        ctx.deny(Reason.FILE_TOO_LARGE, f"content has {len(data)} bytes > max_write_bytes {cap}")
    return data


def as_text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def diff(before: bytes | None, after: bytes) -> dict[str, Any]:
    """A unified diff when both sides are text (``before`` is ``None`` when too large)."""
    old, new = None if before is None else as_text(before), as_text(after)
    if old is None or new is None:
        return {"diff": None}
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after",
                                      lineterm=""))
    added = sum(1 for ln in lines[2:] if ln.startswith("+"))
    removed = sum(1 for ln in lines[2:] if ln.startswith("-"))
    return {"lines_added": added, "lines_removed": removed,
            "diff": "\n".join(lines[:_DIFF_LINES]), "diff_truncated": len(lines) > _DIFF_LINES}
