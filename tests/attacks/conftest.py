"""Fixtures of the attack suites: ``box``, the black-box probes' server (one per module)."""

from tests.attacks.blackbox import box

__all__ = ["box"]
