"""A page of a listing, shared by runtime, images and sandboxes (it imports none of them)."""
from typing import Optional


class Page(list):  # type: ignore[type-arg]
    """A list of every item the listing walked (all pages); `.data` is the list itself."""

    next_cursor: Optional[str] = None
    has_more = False

    @property
    def data(self) -> "Page":
        return self

    def to_list(self, limit: int = 10_000) -> list:  # type: ignore[type-arg]
        return list(self[:limit])
