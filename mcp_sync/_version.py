"""The distribution's version, in one place (the package root and the client's ``clientInfo`` read it)."""

__version__ = "0.1.0"
