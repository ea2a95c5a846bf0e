"""toolkeeper's test suite (a package, so ``tests.support`` is importable by dotted path)."""
