"""AsyncRuntime: the same client for asyncio, running the sync calls on a thread pool
(each pool thread keeps its own keep-alive connection)."""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Dict, Generator, List, Optional, TypeVar, Union

from .process import Process
from .results import CommandResult
from .pages import Page
from .runtime import Runtime
from .sandbox import Sandbox

T = TypeVar("T")
_DONE = object()


class _Pool:
    def __init__(self, max_workers: int) -> None:
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kiln-aio")

    async def run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kw))


class AsyncRuntime:
    """`async with AsyncRuntime() as runtime: sbx = await runtime.sandboxes.create()`.
    Same arguments as Runtime (`AsyncRuntime(api_key, base_url, *, timeout, max_retries,
    max_connections, wait_for_capacity)`); `max_workers` (calls in flight at once) defaults to
    `max_connections`."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, *,
                 max_workers: Optional[int] = None, **kw: Any) -> None:
        self.sync = Runtime(api_key, base_url, **kw)
        self.api_url = self.sync.api_url
        self.base_url = self.api_url
        self._pool = _Pool(max_workers or self.sync.max_connections)
        self.sandboxes = AsyncSandboxes(self)
        self.sandbox = self.sandboxes
        self.snapshots = AsyncSnapshots(self)
        self.images = AsyncImages(self)
        self.image = self.images
        self.limits = _AsyncProxy(self.sync.limits, self._pool)

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        return await self._pool.run(self.sync.request, method, path, **kw)

    async def health(self) -> Dict[str, Any]:
        return await self._pool.run(self.sync.health)

    async def close(self) -> None:
        self._pool.executor.shutdown(wait=False)
        self.sync.close()

    async def __aenter__(self) -> "AsyncRuntime":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncRuntime(api_url={self.api_url!r})"


class _Creating:
    """What `sandboxes.create()` returns: await it, or `async with` it (stops on exit)."""

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self._sandbox: Optional[AsyncSandbox] = None

    def __await__(self) -> Generator[Any, None, "AsyncSandbox"]:
        return self._coro.__await__()

    async def __aenter__(self) -> "AsyncSandbox":
        self._sandbox = await self._coro
        return self._sandbox

    async def __aexit__(self, *exc: Any) -> None:
        if self._sandbox is not None:
            await self._sandbox.__aexit__(*exc)


class AsyncSandboxes:
    def __init__(self, runtime: AsyncRuntime) -> None:
        self._rt = runtime
        self._pool = runtime._pool

    def create(self, **fields: Any) -> _Creating:
        """Same fields as `Runtime.sandboxes.create`."""
        async def go() -> AsyncSandbox:
            return AsyncSandbox(await self._pool.run(self._rt.sync.sandboxes.create, **fields), self._rt)
        return _Creating(go())

    def get_or_create(self, name: str, **fields: Any) -> _Creating:
        """The live sandbox called `name` (woken if paused), or a new one with `fields`."""
        async def go() -> AsyncSandbox:
            return AsyncSandbox(await self._pool.run(self._rt.sync.sandboxes.get_or_create, name, **fields),
                                self._rt)
        return _Creating(go())

    async def get(self, sandbox_id: str) -> "AsyncSandbox":
        return AsyncSandbox(await self._pool.run(self._rt.sync.sandboxes.get, sandbox_id), self._rt)

    async def list(self, **kw: Any) -> List["AsyncSandbox"]:
        page: Page = await self._pool.run(self._rt.sync.sandboxes.list, **kw)
        return [AsyncSandbox(s, self._rt) for s in page]

    async def delete(self, sandbox_id: str) -> Dict[str, Any]:
        return await self._pool.run(self._rt.sync.sandboxes.delete, sandbox_id)


class AsyncSnapshots:
    def __init__(self, runtime: AsyncRuntime) -> None:
        self._s = runtime.sync.snapshots
        self._pool = runtime._pool

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._s, name)

        async def call(*args: Any, **kw: Any) -> Any:
            return await self._pool.run(fn, *args, **kw)
        return call


class AsyncImages(AsyncSnapshots):
    """`await runtime.images.build(...)` and the rest of `Images` (on_log runs on a pool thread);
    `runtime.images.registries` likewise."""

    def __init__(self, runtime: AsyncRuntime) -> None:
        super().__init__(runtime)
        self._s = runtime.sync.images
        self.registries = _AsyncProxy(self._s.registries, self._pool)


class _AsyncProxy:
    """Turns every public method of a sync object into a coroutine function."""

    def __init__(self, target: Any, pool: _Pool) -> None:
        self._target = target
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def call(*args: Any, **kw: Any) -> Any:
            return await self._pool.run(attr, *args, **kw)
        return call


class AsyncFiles(_AsyncProxy):
    """`await sbx.files.write(...)`, `read`, `read_text`, `list`, `stat`, `upload`, `download`..."""


class AsyncNetwork(_AsyncProxy):
    """`await sbx.network.get()`, `set(...)`, `log()`."""


class AsyncProcess(_AsyncProxy):
    """`await proc.wait()`, `write`, `kill`, `refresh`, `read_output`."""

    @property
    def id(self) -> str:
        return self._target.id


class AsyncPorts(_AsyncProxy):
    """`sbx.ports.url(port)` (a plain call) and `await sbx.ports.request(...)`."""

    def url(self, port: int) -> str:
        return self._target.url(port)


class AsyncPreviews(_AsyncProxy):
    """`await sbx.previews.create(port)`, `list()`, `get(port)`, `rotate(port)`, `delete(port)`."""


class AsyncInterpreter(_AsyncProxy):
    """`await sbx.interpreter.run(code, ...)` (callbacks run on a pool thread) and
    `await sbx.interpreter.contexts.create/list/restart/interrupt/delete(...)`."""

    def __init__(self, target: Any, pool: _Pool) -> None:
        super().__init__(target, pool)
        self.contexts = _AsyncProxy(target.contexts, pool)


class AsyncSandbox:
    """Async twin of Sandbox; `async with` stops it on exit. `forward_port` is sync only:
    `sbx.sync.forward_port(port)` (it runs on its own threads)."""

    def __init__(self, sandbox: Sandbox, runtime: AsyncRuntime) -> None:
        self.sync = sandbox
        self.runtime = runtime
        self._pool = runtime._pool
        self.files = AsyncFiles(sandbox.files, self._pool)
        self.network = AsyncNetwork(sandbox.network, self._pool)
        self.ports = AsyncPorts(sandbox.ports, self._pool)
        self.previews = AsyncPreviews(sandbox.previews, self._pool)
        self.interpreter = AsyncInterpreter(sandbox.interpreter, self._pool)

    @staticmethod
    def create(*, client: AsyncRuntime, **fields: Any) -> _Creating:
        return client.sandboxes.create(**fields)

    @staticmethod
    def get_or_create(name: str, *, client: AsyncRuntime, **fields: Any) -> _Creating:
        return client.sandboxes.get_or_create(name, **fields)

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def info(self) -> Dict[str, Any]:
        return self.sync.info

    @property
    def state(self) -> str:
        return self.sync.state

    async def exec(self, command: Any, **kw: Any) -> CommandResult:
        return await self._pool.run(self.sync.exec, command, **kw)

    async def exec_stream(self, command: Any, **kw: Any) -> AsyncIterator[Dict[str, Any]]:
        """Events of a streamed exec as they come (read on a pool thread)."""
        loop = asyncio.get_running_loop()
        queue: "asyncio.Queue[Any]" = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            try:
                for ev in self.sync.exec_stream(command, **kw):
                    loop.call_soon_threadsafe(queue.put_nowait, ev)
                    if stop.is_set():
                        break
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)
            except BaseException as e:  # noqa: BLE001 -- handed to the awaiting side
                loop.call_soon_threadsafe(queue.put_nowait, e)

        fut = loop.run_in_executor(self._pool.executor, pump)
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()  # the pump ends after its next event and closes the stream
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def spawn(self, command: Any, **kw: Any) -> AsyncProcess:
        proc: Process = await self._pool.run(self.sync.spawn, command, **kw)
        return AsyncProcess(proc, self._pool)

    async def refresh(self) -> Dict[str, Any]:
        return await self._pool.run(self.sync.refresh)

    async def metrics(self, range: str = "15m") -> Dict[str, Any]:
        return await self._pool.run(self.sync.metrics, range)

    async def extend(self, seconds: int) -> Dict[str, Any]:
        return await self._pool.run(self.sync.extend, seconds)

    @property
    def paused(self) -> bool:
        return self.sync.paused

    async def stop(self, wait: bool = True, **kw: Any) -> Dict[str, Any]:
        return await self._pool.run(self.sync.stop, wait, **kw)

    async def pause(self, wait: bool = True, **kw: Any) -> Dict[str, Any]:
        return await self._pool.run(self.sync.pause, wait, **kw)

    async def wake(self, wait: bool = True, timeout_seconds: Optional[int] = None, **kw: Any) -> Dict[str, Any]:
        return await self._pool.run(self.sync.wake, wait, timeout_seconds, **kw)

    async def delete(self) -> Dict[str, Any]:
        return await self._pool.run(self.sync.delete)

    async def snapshot(self, **kw: Any) -> Dict[str, Any]:
        return await self._pool.run(self.sync.snapshot, **kw)

    async def fork(self, count: Optional[int] = None, **kw: Any) -> Union["AsyncSandbox", List["AsyncSandbox"]]:
        copies = await self._pool.run(self.sync.fork, count, **kw)
        if isinstance(copies, list):
            return [AsyncSandbox(c, self.runtime) for c in copies]
        return AsyncSandbox(copies, self.runtime)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.state != "stopped":
            try:
                await self.stop(wait=False)
            except Exception:  # noqa: BLE001 -- leaving the block must not hide the first error
                pass

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, state={self.state!r})"
