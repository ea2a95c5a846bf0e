"""The client's façade: ``toolkeeper.client.__all__`` names exactly its public objects."""

from __future__ import annotations

import toolkeeper.client


def test_all_is_complete_and_importable() -> None:
    public = {name for name in vars(toolkeeper.client) if not name.startswith("_")}
    modules = {name for name in public
               if type(getattr(toolkeeper.client, name)).__name__ == "module"}
    assert set(toolkeeper.client.__all__) == public - modules

