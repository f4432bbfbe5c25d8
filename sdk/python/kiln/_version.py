"""The SDK's version."""

__version__ = "0.1.0"
VERSION = __version__
