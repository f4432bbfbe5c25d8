"""Local files the SDK writes (downloads, snapshot tars): under a temporary name beside the
target, renamed only once whole, so the target never holds a part."""

from __future__ import annotations

import os
import tempfile
from typing import BinaryIO, Callable, Optional


def write_whole(local: str, fill: Callable[[BinaryIO], None], mode: Optional[int] = None) -> str:
    """Runs `fill` on a new file beside `local` (parents made), sets `mode`, renames it to
    `local`; whatever `fill` raises removes the partial file. Returns `local`."""
    parent = os.path.dirname(os.path.abspath(local))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kiln-partial-", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, local)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return local
