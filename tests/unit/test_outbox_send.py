"""A response goes to a plain TCP socket in one write when the socket takes it (writev for a Fetch's buffers), and
whatever it does not take at once follows through the stream's send_all: the peer reads the same bytes, in order."""
from __future__ import annotations

import os
import socket
import struct

import trio

from kafkite.network.connection import _Outbox


async def _round_trip(out, expected: bytes) -> None:
    a, b = trio.socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # a small buffer: writes come back partial
    outbox = _Outbox(trio.SocketStream(a), None)
    assert outbox.fd >= 0
    got = bytearray()

    async def read() -> None:
        while len(got) < len(expected):
            got.extend(await b.recv(65536))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await outbox.send(out)
    assert bytes(got) == expected
    a.close()
    b.close()


async def test_one_buffer_and_a_fetchs_buffers_arrive_whole_and_in_order():
    big = os.urandom(3 << 20)
    await _round_trip(b"abc", b"abc")
    await _round_trip(bytearray(big), big)
    parts = [b"head", memoryview(big)[:1000], b"", bytearray(b"x" * 70000), memoryview(big)[1000:]]
    await _round_trip(parts, b"".join(bytes(p) for p in parts))
    many = [bytes([i % 256]) * 7 for i in range(3000)]  # more buffers than one writev takes
    await _round_trip(many, b"".join(many))


async def test_a_reset_peer_is_a_closed_connection():
    a, b = trio.socket.socketpair()
    outbox = _Outbox(trio.SocketStream(a), None)
    b.close()
    try:
        for _ in range(3):
            await outbox.send(b"x" * 100000)
    except trio.BrokenResourceError:
        pass
    else:
        raise AssertionError("sending to a closed peer did not fail")
    a.close()



async def test_a_plain_socket_is_read_directly_the_same_bytes_in_order_then_its_end():
    """_Outbox.receive reads a plain socket with os.read: waiting first once a read found nothing, reading first
    while the client keeps bytes coming (pipelined requests); a cancelled wait reads nothing."""
    a, b = trio.socket.socketpair()
    outbox = _Outbox(trio.SocketStream(a), None)
    with trio.move_on_after(0.05) as scope:  # nothing to read yet: the wait is cancelled, nothing consumed
        await outbox.receive(10)
    assert scope.cancelled_caught
    sent = os.urandom(200000)
    got = bytearray()

    async def write() -> None:
        view = memoryview(sent)
        for i in range(0, len(sent), 7000):
            await b.send(view[i:i + 7000])
            if i % 21000 == 0:
                await trio.sleep(0.001)
        b.shutdown(socket.SHUT_WR)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        while True:
            data = await outbox.receive(5000)
            assert len(data) <= 5000
            if not data:
                break
            got.extend(data)
    assert bytes(got) == sent
    a.close()
    b.close()


async def test_a_reset_while_reading_is_a_closed_connection():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
    conn.setblocking(False)
    outbox = _Outbox(trio.SocketStream(trio.socket.from_stdlib_socket(conn)), None)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    client.close()
    try:
        await outbox.receive(10)
    except trio.BrokenResourceError:
        pass
    else:
        raise AssertionError("a reset connection was read without an error")
    conn.close()
