"""`sandbox.ports`: servers listening inside a sandbox, reached through kilnd by path
(`/v1/sandboxes/{id}/ports/{port}/...`) with the client's key."""

from __future__ import annotations

import http.client
import socket
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple, Union

from . import errors

if TYPE_CHECKING:
    from .sandbox import Sandbox

MAX_BODY = 256 << 20  # an answer larger than this is refused rather than held in memory


def check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be 1-65535, not {port!r}")
    return port


class Ports:
    def __init__(self, sandbox: "Sandbox") -> None:
        self._sandbox = sandbox
        self._t = sandbox._t

    def url(self, port: int) -> str:
        """`…/v1/sandboxes/{id}/ports/{port}/`: the port by path (send the kiln key with it)."""
        return f"{self._t.base_url}{self._sandbox._path}/ports/{check_port(port)}/"

    def request(self, port: int, method: str, path: str = "/", body: Union[bytes, str, None] = None,
                headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = None) -> Tuple[int, Dict[str, str], bytes]:
        """One HTTP request to the server on `port`: (status, headers with lower-case names,
        body). Whatever comes back is returned, errors too: the server's own, and kilnd's
        refusals (502 `port_closed` when nothing listens, 409 `not_running`). Never retried."""
        if not path.startswith("/"):
            path = "/" + path
        target = self._t.path(f"{self._sandbox._path}/ports/{check_port(port)}{path}")
        hdrs = self._t.headers({"Accept": "*/*"})
        if headers:
            hdrs.update(headers)
        data = body.encode() if isinstance(body, str) else body
        conn = self._t.new_connection(timeout)
        try:
            conn.request(method.upper(), target, body=data, headers=hdrs)
            r = conn.getresponse()
            got = r.read(MAX_BODY + 1)
            status, answer_headers = r.status, {k.lower(): v for k, v in r.getheaders()}
        except socket.timeout as e:
            raise errors.TimeoutError(f"{method} port {port}{path}: no answer", code="request_timeout") from e
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionError(f"{method} port {port}{path}: {e}", code="connection_error") from e
        finally:
            conn.close()
        if len(got) > MAX_BODY:
            raise errors.KilnError(f"the answer is over {MAX_BODY} bytes; use forward_port", code="payload_too_large")
        return status, answer_headers, got
