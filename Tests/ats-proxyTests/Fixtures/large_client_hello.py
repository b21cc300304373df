#!/usr/bin/env python3
"""A TLS client whose ClientHello is as large as a post-quantum device's (a test tool).

iOS/macOS 26 send X25519MLKEM768 key shares, which make the ClientHello over 1,200 bytes and often
split it across TCP segments. Python's ssl (OpenSSL 3.0 here) cannot offer ML-KEM, so a long ALPN
list makes the ClientHello large instead (--min-size, default 1,300 bytes; the list ends with
http/1.1 so that a server can still pick a protocol). The client opens a CONNECT tunnel through
--proxy, writes the ClientHello in two TCP segments (TCP_NODELAY, a pause in between), completes
the handshake over memory BIOs, sends GET --path with Connection: close and prints:

  CLIENTHELLO <bytes> SEGMENTS 2
  STATUS <HTTP status line>
  BODY <first line of the body>

Exits 1 with a message on stderr when anything fails. Bounded: every socket wait times out.
"""
import argparse
import socket
import ssl
import sys
import time


def fail(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def flush(sock, outgoing):
    data = outgoing.read()
    if data:
        sock.sendall(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True, help="HOST:PORT of the HTTP proxy")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, default=443)
    parser.add_argument("--cafile", required=True)
    parser.add_argument("--path", default="/hello")
    parser.add_argument("--min-size", type=int, default=1300)
    parser.add_argument("--timeout", type=float, default=10)
    args = parser.parse_args()

    proxy_host, proxy_port = args.proxy.rsplit(":", 1)
    sock = socket.create_connection((proxy_host, int(proxy_port)), timeout=args.timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    target = f"{args.host}:{args.port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk or len(head) > 65536:
            fail(f"no CONNECT answer: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        fail(f"CONNECT refused: {head.splitlines()[0]!r}")

    context = ssl.create_default_context(cafile=args.cafile)
    padding = [f"x-pad-{index:03d}-" + "q" * 24 for index in range(48)]
    context.set_alpn_protocols(padding + ["http/1.1"])
    incoming = ssl.MemoryBIO()
    outgoing = ssl.MemoryBIO()
    engine = context.wrap_bio(incoming, outgoing, server_hostname=args.host)
    try:
        engine.do_handshake()
        fail("the handshake completed without a server")
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()
    if len(hello) < args.min_size:
        fail(f"the ClientHello is only {len(hello)} bytes")
    middle = len(hello) // 2
    sock.sendall(hello[:middle])
    time.sleep(0.2)
    sock.sendall(hello[middle:])
    print(f"CLIENTHELLO {len(hello)} SEGMENTS 2", flush=True)

    deadline = time.monotonic() + args.timeout
    while True:
        try:
            engine.do_handshake()
            flush(sock, outgoing)
            break
        except ssl.SSLWantReadError:
            flush(sock, outgoing)
            if time.monotonic() > deadline:
                fail("handshake timed out")
            data = sock.recv(65536)
            if not data:
                fail("the proxy closed during the handshake")
            incoming.write(data)

    authority = args.host if args.port == 443 else target
    request = f"GET {args.path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    engine.write(request.encode())
    flush(sock, outgoing)
    response = b""
    while time.monotonic() < deadline:
        try:
            chunk = engine.read(65536)
            if not chunk:
                break
            response += chunk
            continue
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
        data = sock.recv(65536)
        if not data:
            incoming.write_eof()
            try:
                response += engine.read(65536)
            except ssl.SSLError:
                pass
            break
        incoming.write(data)
    head, _, body = response.partition(b"\r\n\r\n")
    if not head:
        fail("no response")
    print(f"STATUS {head.splitlines()[0].decode('latin-1')}", flush=True)
    first_line = body.split(b"\n")[0].decode("latin-1")
    print(f"BODY {first_line}", flush=True)


if __name__ == "__main__":
    main()
