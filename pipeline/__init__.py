"""Verbatim: a research pipeline whose every citation is a verbatim quote located in a fetched page."""

__version__ = "0.1.0"
