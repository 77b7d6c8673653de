"""Moved to :mod:`loopfuse.stores._expiry` (the in-memory cache store uses it); kept so
that existing imports of ``loopfuse.dedup._expiry.ExpiryIndex`` go on working."""

from __future__ import annotations

from loopfuse.stores._expiry import ExpiryIndex

__all__ = ["ExpiryIndex"]
