"""Steps 10 and 11 for an upstream MCP tool's result: its content blocks kept as the upstream sent
them, with the two rules every output obeys — secrets masked, size capped (SPEC §2).

- Text (``text`` blocks, and the ``text`` of an embedded resource) is masked, then cut to
  what is left of the ``max_output_chars`` budget, which the blocks share in order (masking
  first, so no cut leaves half a secret). A cut block is kept, shorter or empty: the
  client still sees every block the upstream sent, in its place.
- Binary data (``image``/``audio`` ``data``, an embedded resource's ``blob``, base64) counts
  against the same budget but is never cut — a cut blob does not decode. One that does not
  fit is replaced by a text block saying what was left out; one holding a secret (its
  base64 form, as the redactor finds it) is withheld the same way, since masking would
  corrupt it.
- Every other string (names, URIs, descriptions, annotations, ``_meta``) is masked.

``output``, what REST and library readers get, is ``structuredContent`` when the upstream
sent one (shaped like any output), else the text: one string for one text block, else the
list of texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkeeper.model.call import McpContent
from toolkeeper.secrets.redact import Redactor

_BINARY = {"image": "data", "audio": "data"}


@dataclass(slots=True)
class _Budget:
    left: int
    seen: int = 0
    """Characters of text and binary data the upstream sent."""
    cut: bool = False
    left_out: int = 0
    withheld: int = 0

    def take(self, text: str) -> str:
        self.seen += len(text)
        if len(text) <= self.left:
            self.left -= len(text)
            return text
        self.cut = True
        kept, self.left = text[:self.left], 0
        return kept

    def details(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.cut or self.left_out:
            out = {"truncated": True, "original_chars": self.seen}
        if self.left_out:
            out["left_out_blocks"] = self.left_out
        if self.withheld:
            out["withheld_blocks"] = self.withheld
        return out or None


def shape_blocks(value: McpContent, cap: int, redactor: Redactor
                 ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The blocks as the caller may see them, and what the cap or the redactor changed."""
    budget = _Budget(cap)
    return [_block(b, budget, redactor) for b in value.content], budget.details()


def texts_of(blocks: list[dict[str, Any]]) -> Any:
    """``output`` of a result without ``structuredContent``: its text."""
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    return texts[0] if len(texts) == 1 else texts


def _block(block: dict[str, Any], budget: _Budget, redactor: Redactor) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {**_masked(block, "text", redactor),
                "text": budget.take(redactor.redact_text(str(block.get("text", ""))))}
    if kind in _BINARY:
        return _binary(block, block, _BINARY[kind], budget, redactor)
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, dict):
        if "blob" in resource:
            return _binary(block, resource, "blob", budget, redactor)
        text = budget.take(redactor.redact_text(str(resource.get("text", ""))))
        return {**_masked(block, "resource", redactor),
                "resource": {**_masked(resource, "text", redactor), "text": text}}
    masked: dict[str, Any] = redactor.redact(block)  # resource_link, or a type yet unknown
    return masked


def _binary(block: dict[str, Any], holder: dict[str, Any], field: str, budget: _Budget,
            redactor: Redactor) -> dict[str, Any]:
    """``block`` whole, or a note in its place (over the budget, or holding a secret)."""
    data = str(holder.get(field, ""))
    mime = str(holder.get("mimeType") or block.get("type"))
    budget.seen += len(data)
    if redactor and redactor.redact_text(data) != data:
        budget.withheld += 1
        return _note(f"[{mime} withheld: it contains a secret value]")
    if len(data) > budget.left:
        budget.left_out += 1
        return _note(f"[{mime} left out: {len(data)} base64 characters, over the output "
                     "cap]")
    budget.left -= len(data)
    if holder is block:
        return {**_masked(block, field, redactor), field: data}
    return {**_masked(block, "resource", redactor),
            "resource": {**_masked(holder, field, redactor), field: data}}


def _masked(block: dict[str, Any], skip: str, redactor: Redactor) -> dict[str, Any]:
    """``block`` without ``skip`` (its payload, shaped by the caller), every string masked."""
    rest: dict[str, Any] = redactor.redact({k: v for k, v in block.items() if k != skip})
    return rest


def _note(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


__all__ = ["shape_blocks", "texts_of"]
