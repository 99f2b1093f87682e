"""A loopback TCP proxy that injects network faults, for tests against the real PostgreSQL and MariaDB.

    with FaultProxy(5432, policy=fraction(0.2, Fault.reset(after_bytes=2000), seed=7)) as proxy:
        ... connect to 127.0.0.1:proxy.port instead of 5432 ...
    proxy.log  # one (index, fault kind) per connection accepted

Every accepted connection gets a number (0, 1, 2, ... in accept order) and the policy decides its fault:

- `Fault.ok()`: forward both ways until either side closes.
- `Fault.reset(after_bytes=n)`: forward, then once `n` bytes have come back from the server, abort both
  sides with a TCP RST (SO_LINGER 0): the client sees "connection reset by peer" or "server closed the
  connection unexpectedly" mid-handshake or mid-result. `after_bytes=0` resets right after accept.
- `Fault.stall(seconds)`: accept, forward nothing for `seconds`, then reset (a hung server or network).
- `Fault.refuse()`: reset at once, before a byte moves (what a client sees of a server refusing).
- `Fault.hold(after_bytes=n)`: forward until `n` bytes came back from the server, then forward nothing more
  until the test calls `proxy.release()`, then reset. `proxy.holding` (a threading.Event) is set once a
  connection is being held: a test orders what happens around a stalled server without timing anything.
- `Fault.pause(after_bytes=n)`: like hold, but `proxy.release()` lets the connection go on (a server that is
  slow to answer, then answers).

`FaultProxy(port, rate=bytes_per_second)` also paces the link: every byte that crosses the proxy, in either
direction, waits its turn on one shared link of that rate (one bucket per direction, shared by all of the
connections, as a WAN link is), so a benchmark can model a remote source on this machine's loopback.
`proxy.rate` may be changed (or set to None) at any time. `proxy.sent` counts the bytes forwarded each way
(`"down"`: server to client, `"up"`: client to server).

`proxy.listening = False` closes the listening socket so connecting fails with ECONNREFUSED (a server that
is down); `True` listens again on the same port. `proxy.policy` may be swapped at any time.
`proxy.log` has the fault each connection was given, `proxy.fired` the connections where it happened (a
reset whose byte budget the connection never reached did not), `proxy.received` the bytes each got back.

Policies (`Policy = Callable[[int], Fault]`): `always(fault)`, `fraction(p, fault, seed)` (a seeded,
reproducible share of connections), `schedule([fault, ...], then=Fault.ok())` (by index), or any callable.
The proxy runs its own asyncio loop on a daemon thread and stops on `__exit__`: no server outlives a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType


@dataclass(frozen=True)
class Fault:
    kind: str  # ok | reset | stall | refuse
    after_bytes: int = 0
    seconds: float = 0.0

    @staticmethod
    def ok() -> Fault:
        return Fault("ok")

    @staticmethod
    def reset(after_bytes: int = 0) -> Fault:
        return Fault("reset", after_bytes=after_bytes)

    @staticmethod
    def stall(seconds: float) -> Fault:
        return Fault("stall", seconds=seconds)

    @staticmethod
    def refuse() -> Fault:
        return Fault("refuse")

    @staticmethod
    def hold(after_bytes: int = 0) -> Fault:
        return Fault("hold", after_bytes=after_bytes)

    @staticmethod
    def pause(after_bytes: int = 0) -> Fault:
        return Fault("pause", after_bytes=after_bytes)


Policy = Callable[[int], Fault]

CHUNK = 65536


class Link:
    """One direction of a rate-limited link: a virtual clock of when the link is free again. Each chunk
    waits until the bytes before it have gone, then holds the link for len(chunk) / rate seconds. Used from
    the proxy's one event loop only."""

    def __init__(self, rate: float):
        if rate <= 0:
            raise ValueError("rate must be positive (bytes per second)")
        self.rate = rate
        self._free_at = 0.0

    def delay(self, size: int, now: float) -> float:
        """Seconds the chunk of `size` bytes, ready at `now`, waits before it has crossed the link."""
        self._free_at = max(self._free_at, now) + size / self.rate
        return self._free_at - now

    async def cross(self, size: int) -> None:
        wait = self.delay(size, asyncio.get_running_loop().time())
        if wait > 0:
            await asyncio.sleep(wait)


def always(fault: Fault) -> Policy:
    return lambda _index: fault


def fraction(share: float, fault: Fault | Sequence[Fault], seed: int = 0) -> Policy:
    """A fault for a reproducible `share` of connections (decided per index from `seed`), else ok. Given
    several faults, each faulty connection gets one of them (also decided from `seed`)."""
    faults = [fault] if isinstance(fault, Fault) else list(fault)

    def policy(index: int) -> Fault:
        rng = random.Random(seed * 1_000_003 + index)
        return rng.choice(faults) if rng.random() < share else Fault.ok()

    return policy


def schedule(faults: Sequence[Fault], then: Fault | None = None) -> Policy:
    """Connection i gets faults[i]; every later one gets `then` (default ok)."""
    rest = then or Fault.ok()
    return lambda index: faults[index] if index < len(faults) else rest


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(
        self,
        target_port: int,
        policy: Policy | None = None,
        target_host: str = "127.0.0.1",
        rate: float | None = None,
    ):
        """`rate`: bytes per second of the modelled link in each direction (None: as fast as loopback)."""
        self.target = (target_host, target_port)
        self.links: dict[str, Link] = {}
        self.rate = rate
        self.sent = {"down": 0, "up": 0}
        self.policy: Policy = policy or always(Fault.ok())
        self.log: list[tuple[int, str]] = []
        self.received: dict[int, int] = {}  # bytes the server sent back, per connection
        self.fired: set[int] = set()  # connections whose fault happened (a reset: once its budget ran out)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._count = 0
        self._lock = threading.Lock()
        self._open: set[asyncio.StreamWriter] = set()
        self.holding = threading.Event()  # a connection is being held (Fault.hold)
        self._released: asyncio.Event | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)  # type: ignore[arg-type]

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    @property
    def listening(self) -> bool:
        return self._server is not None

    @listening.setter
    def listening(self, on: bool) -> None:
        if on and self._server is None:
            self._call(self._listen())
        elif not on and self._server is not None:
            self._call(self._close_listener())

    def release(self) -> None:
        """End every held connection with a reset and let paused ones go on (a connection that reaches its
        hold or pause afterwards does so at once)."""
        self._call(self._release())

    async def _release(self) -> None:
        self._hold_gate().set()

    async def _held(self) -> None:
        gate = self._hold_gate()
        if not gate.is_set():
            self.holding.set()
            await gate.wait()

    def _hold_gate(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    @property
    def rate(self) -> float | None:
        """The modelled link's bytes per second each way, None when unlimited; settable at any time (applies
        from the next chunk forwarded)."""
        return self.links["down"].rate if self.links else None

    @rate.setter
    def rate(self, value: float | None) -> None:
        self.links = {"down": Link(value), "up": Link(value)} if value is not None else {}

    def kinds(self) -> list[str]:
        with self._lock:
            return [kind for _i, kind in self.log]

    # -- the loop side --------------------------------------------------------------------------------
    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port or 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _shutdown(self) -> None:
        await self._close_listener()
        for writer in list(self._open):
            _rst(writer)
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:  # stalled and forwarding connections: ended, not left pending
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            index = self._count
            self._count += 1
        fault = self.policy(index)
        with self._lock:
            self.log.append((index, fault.kind))
        self._open.add(writer)
        try:
            if fault.kind == "refuse" or (fault.kind == "reset" and fault.after_bytes <= 0):
                self.fired.add(index)
                _rst(writer)
                return
            if fault.kind == "stall":
                self.fired.add(index)
                await asyncio.sleep(fault.seconds)
                _rst(writer)
                return
            await self._forward(reader, writer, fault, index)
        finally:
            self._open.discard(writer)

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fault: Fault, index: int
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _rst(writer)
            return
        self._open.add(up_writer)
        budget = [fault.after_bytes if fault.kind in ("reset", "hold", "pause") else -1]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, counted: bool) -> None:
            direction = "down" if counted else "up"
            try:
                while data := await src.read(CHUNK):
                    if (link := self.links.get(direction)) is not None:
                        await link.cross(len(data))
                    if counted:
                        self.received[index] = self.received.get(index, 0) + len(data)
                    if counted and budget[0] >= 0 and fault.kind == "pause":
                        if len(data) >= budget[0]:
                            self.fired.add(index)
                            dst.write(data[: budget[0]])
                            with contextlib.suppress(ConnectionError):
                                await dst.drain()
                            await self._held()
                            data, budget[0] = data[budget[0] :], -1
                        else:
                            budget[0] -= len(data)
                    elif counted and budget[0] >= 0:
                        if len(data) >= budget[0]:
                            self.fired.add(index)
                            dst.write(data[: budget[0]])
                            with contextlib.suppress(ConnectionError):
                                await dst.drain()
                            if fault.kind == "hold":
                                await self._held()
                            _rst(writer)
                            _rst(up_writer)
                            return
                        budget[0] -= len(data)
                    dst.write(data)
                    self.sent[direction] += len(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        try:
            await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))
        finally:
            self._open.discard(up_writer)
