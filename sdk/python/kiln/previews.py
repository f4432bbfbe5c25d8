"""`sandbox.previews`: share a port at its own host name (`http://{port}-{id}.{domain}/`),
private (a token) or public."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .client import new_idempotency_key
from .ports import check_port

if TYPE_CHECKING:
    from .sandbox import Sandbox


class Previews:
    def __init__(self, sandbox: "Sandbox") -> None:
        self._t = sandbox._t
        self._base = sandbox._path + "/previews"

    def create(self, port: int, visibility: Optional[str] = None, ttl_seconds: Optional[int] = None,
               expires_at: Optional[str] = None) -> Dict[str, Any]:
        """Shares `port` (again: changes its visibility and token lifetime); the Preview.
        A private one's visitors send `token` in `x-kiln-preview-token` or open `urlWithToken`."""
        body: Dict[str, Any] = {"port": check_port(port)}
        for name, value in (("visibility", visibility), ("ttlSeconds", ttl_seconds), ("expiresAt", expires_at)):
            if value is not None:
                body[name] = value
        return self._t.request("POST", self._base, json=body, idempotency_key=new_idempotency_key()).json()

    def list(self) -> List[Dict[str, Any]]:
        """Every shared port, each private one with a fresh token."""
        return self._t.request("GET", self._base).json()["data"]

    def get(self, port: int, ttl_seconds: Optional[int] = None,
            expires_at: Optional[str] = None) -> Dict[str, Any]:
        """The Preview with a new token of that lifetime (the earlier bound wins)."""
        return self._t.request("GET", f"{self._base}/{check_port(port)}",
                               query={"ttlSeconds": ttl_seconds, "expiresAt": expires_at}).json()

    def rotate(self, port: int) -> Dict[str, Any]:
        """A new secret: every earlier token is refused and open connections are cut."""
        return self._t.request("POST", f"{self._base}/{check_port(port)}:rotate", json={},
                               idempotency_key=new_idempotency_key()).json()

    def delete(self, port: int) -> Dict[str, Any]:
        """Stops sharing `port`: `{id, sandboxId, port, deleted: True}`."""
        return self._t.request("DELETE", f"{self._base}/{check_port(port)}",
                               idempotency_key=new_idempotency_key()).json()
