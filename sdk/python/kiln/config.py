"""Where the daemon is and which key to send, from arguments and the environment."""

from __future__ import annotations

import os
from typing import Optional, Tuple

DEFAULT_API_URL = "http://127.0.0.1:7070"
DEFAULT_ADMIN_KEY_FILE = "/var/lib/kiln/admin.key"


def _env(*names: str) -> Optional[str]:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def read_admin_key() -> Optional[str]:
    """The local admin key kilnd writes (KILN_ADMIN_KEY_FILE overrides the path), if readable."""
    path = _env("KILN_ADMIN_KEY_FILE") or DEFAULT_ADMIN_KEY_FILE
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except OSError:
        return None
    return key or None


def resolve(api_url: Optional[str] = None, api_key: Optional[str] = None) -> Tuple[str, Optional[str]]:
    """Arguments win, then KILN_API_URL/KILN_API_KEY, then RUNTIME_API_URL/RUNTIME_API_KEY,
    then http://127.0.0.1:7070 and the local admin key file."""
    url = api_url or _env("KILN_API_URL", "RUNTIME_API_URL") or DEFAULT_API_URL
    key = api_key or _env("KILN_API_KEY", "RUNTIME_API_KEY") or read_admin_key()
    return url, key
