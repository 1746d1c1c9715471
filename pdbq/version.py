"""The package version (read by pyproject.toml at build time)."""

__version__ = "0.1.0"
