"""`sandbox.network`: per-sandbox egress rules (PUT/GET …/network, GET …/network/log)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

if TYPE_CHECKING:
    from .sandbox import Sandbox


class Network:
    """Egress rules of one sandbox. Calls go to the daemon as they are: a daemon without
    these routes answers 404 `route_not_found` (NotFoundError)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._t = sandbox._t
        self._path = sandbox._path + "/network"

    def get(self) -> Dict[str, Any]:
        """The NetworkPolicy in force."""
        return self._t.request("GET", self._path).json()

    def set(self, rules: Optional[Dict[str, Any]] = None, *, internet: Optional[bool] = None,
            allow: Optional[Sequence[str]] = None, deny: Optional[Sequence[str]] = None,
            connect: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Replaces every rule: `internet` on/off, `allow` narrows to hosts/`*.domain`/IPs/CIDRs,
        `deny` always wins, `connect` adds `host:port` pairs. Or pass the whole `rules` dict."""
        body: Dict[str, Any] = dict(rules or {})
        for name, value in (("internet", internet), ("allow", allow), ("deny", deny), ("connect", connect)):
            if value is not None:
                body[name] = value if isinstance(value, bool) else list(value)
        if "internet" not in body:
            raise TypeError("network.set() needs internet=True/False (or a rules dict with it)")
        return self._t.request("PUT", self._path, json=body).json()

    def off(self) -> Dict[str, Any]:
        return self.set(internet=False)

    def on(self) -> Dict[str, Any]:
        return self.set(internet=True)

    def log(self, *, limit: Optional[int] = None,
            cursor: Optional[str] = None) -> Union[List[Dict[str, Any]], Dict[str, Any]]:
        """The sandbox's connection log: the entries (`data`) of `GET …/network/log`."""
        answer = self._t.request("GET", self._path + "/log", query={"limit": limit, "cursor": cursor}).json()
        if isinstance(answer, dict) and isinstance(answer.get("data"), list):
            return answer["data"]
        return answer
