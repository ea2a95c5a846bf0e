"""REST routes: discovery (being written)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["discovery"])
