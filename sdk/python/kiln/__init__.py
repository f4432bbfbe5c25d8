"""kiln: Python SDK of the kiln sandbox daemon (kilnd). Standard library only.

    from kiln import Runtime
    with Runtime().sandboxes.create(vcpu=1, memory_mib=512) as sbx:
        print(sbx.exec("python3 -c 'print(6 * 7)'").stdout)
"""

from ._version import VERSION, __version__
from .aio import AsyncFiles, AsyncNetwork, AsyncProcess, AsyncRuntime, AsyncSandbox, AsyncSandboxes
from .errors import (
    AccountBlockedError,
    APIError,
    AuthenticationError,
    AuthError,
    CapacityError,
    CommandError,
    CommandTimeoutError,
    ConflictError,
    ImageBuildError,
    ConnectionError,
    InvalidRequestError,
    KilnError,
    NotFoundError,
    PaymentRequiredError,
    PermissionDeniedError,
    RateLimitError,
    RuntimeAPIError,
    RuntimeConnectionError,
    ServiceUnavailableError,
    TimeoutError,
)
from .files import Files
from .images import Image, Images, Registries
from .network import Network
from .process import Process
from .results import CommandResult
from .pages import Page
from .runtime import Runtime, Sandboxes, Snapshots
from .sandbox import Sandbox

# The public API's base error name (it shadows the builtin only where imported by name).
RuntimeError = KilnError  # noqa: A001

__all__ = [
    "VERSION", "__version__",
    "Runtime", "AsyncRuntime", "Sandbox", "AsyncSandbox", "Sandboxes", "AsyncSandboxes", "Snapshots",
    "Files", "AsyncFiles", "Network", "AsyncNetwork", "Process", "AsyncProcess", "CommandResult", "Page",
    "KilnError", "APIError", "RuntimeAPIError", "AuthenticationError", "AuthError", "PermissionDeniedError",
    "NotFoundError", "ConflictError", "CapacityError", "InvalidRequestError", "RateLimitError",
    "ServiceUnavailableError", "AccountBlockedError", "PaymentRequiredError", "ConnectionError",
    "RuntimeConnectionError", "TimeoutError", "CommandError", "CommandTimeoutError",
    "Image", "Images", "Registries", "ImageBuildError",
]


def __getattr__(name: str):  # `kiln.gym` / `kiln.rewards` load on first use (gym may import gymnasium)
    if name in ("gym", "rewards"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
