#!/usr/bin/env python3
"""WebSocket echo client for the ats-proxy end-to-end tests (a test tool, never product code).

Goes through an explicit HTTP proxy: ws:// as an absolute-form GET with Upgrade (or, with --connect, as
CONNECT and then an origin-form GET with Upgrade in cleartext inside the tunnel, as browsers send it),
wss:// as CONNECT, TLS to the proxy (trusting --cacert), then an origin-form GET with Upgrade. Sends a
text message, a 100 KB binary message and a close frame, checks the echoes, prints "ECHO OK".
Exits 1 with the reason on stdout otherwise.
"""

import argparse
import base64
import hashlib
import os
import socket
import ssl
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from origin import WS_GUID, make_frame, read_frame  # noqa: E402


def fail(message):
    print(f"FAIL {message}", flush=True)
    sys.exit(1)


def read_head(stream):
    lines = []
    while True:
        line = stream.readline(65536)
        if not line:
            fail(f"connection closed while reading a response head after {lines!r}")
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--cacert")
    parser.add_argument("--connect", action="store_true", help="ws:// through a CONNECT tunnel")
    args = parser.parse_args()

    proxy_host, proxy_port = args.proxy.rsplit(":", 1)
    url = urllib.parse.urlsplit(args.url)
    port = url.port or (443 if url.scheme == "wss" else 80)
    sock = socket.create_connection((proxy_host, int(proxy_port)), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = (
        "Host: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).format(host=url.netloc, key=key)
    if url.scheme == "ws" and args.connect:
        sock.sendall(f"CONNECT {url.hostname}:{port} HTTP/1.1\r\nHost: {url.hostname}:{port}\r\n\r\n".encode())
        # Unbuffered: nothing of what follows the CONNECT's answer may be read into a buffer dropped here.
        raw = sock.makefile("rb", buffering=0)
        head = read_head(raw)
        if not head[0].startswith("HTTP/1.1 200"):
            fail(f"CONNECT answered {head[0]}")
        sock.sendall(f"GET {url.path or '/'} HTTP/1.1\r\n{upgrade}".encode())
    elif url.scheme == "wss":
        sock.sendall(f"CONNECT {url.hostname}:{port} HTTP/1.1\r\nHost: {url.hostname}:{port}\r\n\r\n".encode())
        raw = sock.makefile("rb")
        head = read_head(raw)
        if not head[0].startswith("HTTP/1.1 200"):
            fail(f"CONNECT answered {head[0]}")
        context = ssl.create_default_context(cafile=args.cacert)
        sock = context.wrap_socket(sock, server_hostname=url.hostname)
        sock.sendall(f"GET {url.path or '/'} HTTP/1.1\r\n{upgrade}".encode())
    else:
        sock.sendall(f"GET {args.url} HTTP/1.1\r\n{upgrade}".encode())
    stream = sock.makefile("rb")
    head = read_head(stream)
    if not head[0].startswith("HTTP/1.1 101"):
        fail(f"upgrade answered {head[0]}")
    headers = {line.split(":", 1)[0].strip().lower(): line.split(":", 1)[1].strip() for line in head[1:]}
    expected = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != expected:
        fail(f"bad Sec-WebSocket-Accept in {head!r}")
    messages = [(1, "héllo through ats-proxy".encode()), (2, bytes(i % 256 for i in range(100_000)))]
    for opcode, data in messages:
        sock.sendall(make_frame(opcode, data, mask=True))
        frame = read_frame(stream)
        if frame != (opcode, data):
            fail(f"echo mismatch for opcode {opcode}: got {None if frame is None else (frame[0], len(frame[1]))}")
    sock.sendall(make_frame(8, b"\x03\xe8", mask=True))
    frame = read_frame(stream)
    if frame is None or frame[0] != 8:
        fail(f"no close frame echoed: {frame!r}")
    print("ECHO OK", flush=True)


if __name__ == "__main__":
    main()
