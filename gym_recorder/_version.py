"""The package version (independent of the on-disk format version)."""

__version__ = "0.1.0"
