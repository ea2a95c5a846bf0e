"""The package version (one home: the root package re-exports it, the faces and the
upstream client name it without importing the whole package)."""

__version__ = "0.1.0"
