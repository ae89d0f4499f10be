"""Frames on a socket, and the only deserialiser the judge applies to what a worker sends.

A frame is an 8-byte little-endian length and a pickle (protocol 5) of a tree of plain
values: None, bool, int, float, str, bytes, bytearray, tuple, list, dict, set, frozenset.
The receiving side unpickles with ``find_class`` refused: no class can be named, so no
constructor, ``__reduce__`` or global can run. Whatever a hostile worker puts on the wire,
the judge gets plain data back, or a ``WireError``.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import struct
import time
from typing import Any

from .schema import ProtocolError

_HEADER = struct.Struct("<Q")
DEFAULT_MAX_FRAME_BYTES = 512 * 1024 * 1024
MAX_SPIN_S = 0.001
_YIELD_AFTER_S = 0.00005


class WireError(ProtocolError):
    """The peer sent something that is not a well-formed frame (or hung up), or a message
    that does not fit its layout (schema.py)."""


class PeerClosed(WireError):
    """The peer closed the connection (it exited or crashed)."""


class ReplyTooLarge(WireError):
    """A message that would take more memory to rebuild than its receiver allows."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # the whole point
        raise pickle.UnpicklingError(f"frames carry plain data only, not {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("frames carry no persistent ids")


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=5)


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Unpickle plain data only (see the module docstring)."""
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed frame is one kind of error
        raise WireError(f"malformed frame: {type(exc).__name__}: {exc}") from None


class FramedSocket:
    """Length-prefixed frames over a connected stream socket."""

    def __init__(self, sock: socket.socket, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        # How long a receive polls before it sleeps (0: it sleeps at once). Set while the
        # peer has a CPU of its own (see grader/engine/cpus.py): waking a sleeping process
        # on another CPU costs tens of microseconds, an answer usually comes sooner.
        self.spin_s = 0.0
        # Bytes of the frames sent and received so far (headers included): a measurement's
        # share of the transport is estimated from them (grader/engine/judge_bridge.py).
        self.bytes_sent = self.bytes_received = self.last_frame_bytes = 0
        self._buf = bytearray(1 << 16)  # bytes received but not yet consumed: [_start, _end)
        self._start = self._end = 0

    def send(self, value: Any) -> None:
        data = dumps(value)
        self.bytes_sent += _HEADER.size + len(data)
        self.sock.sendall(_HEADER.pack(len(data)) + data if len(data) < 65536 else _HEADER.pack(len(data)))
        if len(data) >= 65536:
            self.sock.sendall(data)

    def recv(self) -> Any:
        self._fill(_HEADER.size)
        (size,) = _HEADER.unpack_from(self._buf, self._start)
        if size > self.max_frame_bytes:
            raise WireError(f"a frame of {size:,} bytes is over the {self.max_frame_bytes:,}-byte limit")
        self._start += _HEADER.size
        self.bytes_received += _HEADER.size + size
        self.last_frame_bytes = size
        if size > len(self._buf):  # a large frame: read it straight into its own buffer
            data = bytearray(size)
            have = self._end - self._start
            data[:have] = self._buf[self._start:self._end]
            self._start = self._end = 0
            view = memoryview(data)
            while have < size:
                k = self.sock.recv_into(view[have:], size - have)
                if k == 0:
                    raise PeerClosed("the other process closed the connection")
                have += k
            return loads(data)
        self._fill(size)
        value = loads(memoryview(self._buf)[self._start:self._start + size])
        self._start += size
        return value

    def _fill(self, n: int) -> None:
        """Make at least n bytes available at self._start (one recv usually suffices)."""
        if self._end - self._start >= n:
            return
        if self._start:
            remaining = self._end - self._start
            self._buf[:remaining] = self._buf[self._start:self._end]
            self._start, self._end = 0, remaining
        view = memoryview(self._buf)
        while self._end - self._start < n:
            k = self._recv_into(view[self._end:], len(self._buf) - self._end)
            if k == 0:
                raise PeerClosed("the other process closed the connection")
            self._end += k

    def _recv_into(self, view: memoryview, size: int) -> int:
        if self.spin_s > 0:
            start = time.perf_counter()
            while True:
                try:
                    return self.sock.recv_into(view, size, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    waited = time.perf_counter() - start
                    if waited > self.spin_s:
                        break
                    if waited > _YIELD_AFTER_S:
                        os.sched_yield()  # a runnable process on this CPU goes first
        return self.sock.recv_into(view, size)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
