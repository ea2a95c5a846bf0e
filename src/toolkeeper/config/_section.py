"""The base of every ``toolkeeper.yaml`` section: unknown keys are errors, values frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
