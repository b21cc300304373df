#!/usr/bin/env python3
"""Origin server for the ats-proxy end-to-end tests (a test tool, never product code).

Plain HTTP or TLS (certificate and key from PEM files), HTTP/1.1 keep-alive, one thread per
connection, bound to 127.0.0.1 only. Prints "READY <port>" on stdout once listening. Every
request line it receives is appended to --log (so a test can prove a request never arrived).

Routes:
  GET  /hello               200 "hello from <name>\n"
  GET  /headers             200 JSON object of the request headers as received
  GET  /bytes?n=N           N deterministic bytes, Content-Length, X-Body-SHA256
  GET  /chunked?n=N         the same bytes, Transfer-Encoding: chunked (varied chunk sizes)
  POST /echo[?chunked=1]    echoes the request body (Content-Length or chunked request);
                            X-Request-Length, X-Request-SHA256, X-Request-Chunked
  GET  /status/<code>       that status with a short body and X-Custom: value
  GET  /reset-mid           head announcing 1 MB, 1000 bytes, then a TCP reset
  GET  /reset-before-head   reads the request, then a TCP reset without answering
  GET  /close-before-head   reads the request, then a clean close without answering
  GET|POST /close-if-reused  on a connection's first request 200 "fresh <conn>\n" (a POST
                            body is read first); on a later one a clean close without answering,
                            like an origin whose keep-alive timeout struck as the request arrived
  GET  /ws                  WebSocket (RFC 6455) echo of text and binary messages
  GET  /stall-after-head?hold=S  head announcing 1000 bytes, 10 bytes, then nothing for S seconds
                            (default 30) and a close: an origin that stalls mid-response
  GET  /latin1              200 with the header X-Latin1: caf<0xE9> (one obs-text byte, not UTF-8)
  GET  /files/<name>        200 with the file <name> of --files DIR (404 when missing or no --files)
  GET  /alt-svc?v=VALUE     200 "alt-svc\n" with the header Alt-Svc: VALUE (one header per v given)
Every response carries X-Origin: <name> and X-Conn: <per-connection number>.
TLS options: --tls-version pins one version, --group limits key exchange to one group, --no-ems
refuses the extended master secret (RFC 7627) at TLS 1.2.
"""

import argparse
import base64
import hashlib
import http.server
import itertools
import json
import os
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import warnings

warnings.simplefilter("ignore", DeprecationWarning)

BLOCK = bytes((i * 7 + 13) % 251 for i in range(1 << 20))
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def payload(n):
    """N deterministic bytes (a 1 MiB pattern repeated)."""
    whole, rest = divmod(n, len(BLOCK))
    return BLOCK * whole + BLOCK[:rest]


def payload_chunks(n):
    sent = 0
    while sent < n:
        size = min(len(BLOCK), n - sent)
        yield BLOCK[:size]
        sent += size


def sha256_of_payload(n):
    digest = hashlib.sha256()
    for chunk in payload_chunks(n):
        digest.update(chunk)
    return digest.hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "e2e-origin"

    def log_message(self, format, *args):
        pass

    def setup(self):
        super().setup()
        self.conn_id = next(self.server.connection_numbers)
        self.requests_on_conn = 0

    def parse_request(self):
        ok = super().parse_request()
        if ok:
            self.requests_on_conn += 1
            with self.server.log_lock:
                with open(self.server.log_path, "a") as log:
                    log.write(f"{self.command} {self.path} Host={self.headers.get('Host', '')}\n")
        return ok

    def common_headers(self):
        self.send_header("X-Origin", self.server.name)
        self.send_header("X-Conn", str(self.conn_id))

    def simple(self, status, body, content_type="text/plain", extra=()):
        self.send_response(status)
        self.common_headers()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        """(body, was_chunked) of the request."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                line = self.rfile.readline(1024).strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts), True
                parts.append(self.rfile.read(size))
                self.rfile.readline(16)
        length = int(self.headers.get("Content-Length", "0") or "0")
        return (self.rfile.read(length) if length else b""), False

    def reset(self):
        """Closes the TCP connection with a reset (SO_LINGER 0), without any TLS close_notify."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        path = url.path
        if path == "/hello":
            self.simple(200, f"hello from {self.server.name}\n".encode())
        elif path.startswith("/files/"):
            name = os.path.basename(path[len("/files/"):])
            full = os.path.join(self.server.files, name) if self.server.files and name else None
            if full and os.path.isfile(full):
                with open(full, "rb") as handle:
                    kind = "text/html; charset=utf-8" if name.endswith(".html") else "application/json"
                    self.simple(200, handle.read(), kind)
            else:
                self.simple(404, b"no such file\n")
        elif path == "/alt-svc":
            self.simple(200, b"alt-svc\n", extra=[("Alt-Svc", value) for value in query.get("v", [])])
        elif path == "/headers":
            body = json.dumps([[k, v] for k, v in self.headers.items()]).encode()
            self.simple(200, body, "application/json")
        elif path == "/bytes":
            n = int(query.get("n", ["0"])[0])
            self.send_response(200)
            self.common_headers()
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.send_header("X-Body-SHA256", sha256_of_payload(n))
            self.end_headers()
            try:
                for chunk in payload_chunks(n):
                    self.wfile.write(chunk)
            except OSError:
                self.close_connection = True
        elif path == "/chunked":
            n = int(query.get("n", ["0"])[0])
            self.send_response(200)
            self.common_headers()
            self.send_header("Content-Type", "application/octet-stream")
            if self.request_version != "HTTP/1.0":
                self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Body-SHA256", sha256_of_payload(n))
            self.end_headers()
            data = payload(n)
            if self.request_version == "HTTP/1.0":
                # No chunked coding for HTTP/1.0 (RFC 9112 6.1): close-delimited instead.
                self.close_connection = True
                self.wfile.write(data)
                return
            offset = 0
            for size in itertools.cycle([1, 17, 4096, 65536, 300000]):
                if offset >= n:
                    break
                piece = data[offset : offset + size]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                offset += len(piece)
            self.wfile.write(b"0\r\n\r\n")
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            if code in (204, 304):
                # No content allowed (RFC 9110 15.3.5, 15.4.5): head only.
                self.send_response(code)
                self.common_headers()
                self.send_header("X-Custom", "value")
                self.end_headers()
            else:
                self.simple(code, f"status {code}\n".encode(), extra=[("X-Custom", "value")])
        elif path == "/reset-mid":
            self.send_response(200)
            self.common_headers()
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.wfile.flush()
            # Let the head and the first bytes reach the proxy before the reset (a reset makes
            # the receiver drop data it has not read yet).
            time.sleep(0.5)
            self.reset()
        elif path == "/reset-before-head":
            self.reset()
        elif path == "/close-before-head":
            self.close_connection = True
        elif path == "/close-if-reused":
            self.close_if_reused()
        elif path == "/stall-after-head":
            hold = float(query.get("hold", ["30"])[0])
            self.send_response(200)
            self.common_headers()
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"y" * 10)
            self.wfile.flush()
            time.sleep(hold)
            self.close_connection = True
        elif path == "/latin1":
            # send_header encodes with Latin-1: the value goes out as the single byte 0xE9.
            self.simple(200, b"latin1\n", extra=[("X-Latin1", "caf\u00e9")])
        elif path == "/ws":
            self.websocket()
        else:
            self.simple(404, b"not found\n")

    def close_if_reused(self):
        if self.requests_on_conn > 1:
            self.close_connection = True
        else:
            self.simple(200, f"fresh {self.conn_id}\n".encode())

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/close-if-reused":
            self.read_body()
            self.close_if_reused()
            return
        if url.path != "/echo":
            self.simple(404, b"not found\n")
            return
        body, was_chunked = self.read_body()
        chunked_reply = urllib.parse.parse_qs(url.query).get("chunked") == ["1"]
        self.send_response(200)
        self.common_headers()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Request-Length", str(len(body)))
        self.send_header("X-Request-SHA256", hashlib.sha256(body).hexdigest())
        self.send_header("X-Request-Chunked", "yes" if was_chunked else "no")
        if chunked_reply:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for offset in range(0, len(body), 70000):
                piece = body[offset : offset + 70000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key:
            self.simple(400, b"not a websocket upgrade\n")
            return
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.common_headers()
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            frame = read_frame(self.rfile)
            if frame is None:
                return
            opcode, data = frame
            if opcode == 8:
                self.wfile.write(make_frame(8, data, mask=False))
                return
            if opcode == 9:
                self.wfile.write(make_frame(10, data, mask=False))
                continue
            self.wfile.write(make_frame(opcode, data, mask=False))


def read_exact(stream, n):
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))
        if not part:
            return None
        data += part
    return data


def read_frame(stream):
    """(opcode, payload) of one unfragmented frame, or None at EOF."""
    head = read_exact(stream, 2)
    if head is None:
        return None
    opcode = head[0] & 0x0F
    masked = head[1] & 0x80
    length = head[1] & 0x7F
    if length == 126:
        length = struct.unpack("!H", read_exact(stream, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", read_exact(stream, 8))[0]
    mask = read_exact(stream, 4) if masked else None
    data = read_exact(stream, length) if length else b""
    if data is None:
        return None
    if mask:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return opcode, data


def make_frame(opcode, data, mask):
    head = bytes([0x80 | opcode])
    bit = 0x80 if mask else 0
    if len(data) < 126:
        head += bytes([bit | len(data)])
    elif len(data) < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", len(data))
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", len(data))
    if mask:
        key = b"\x11\x22\x33\x44"
        return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return head + data


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 2048

    def server_bind(self):
        # HTTPServer.server_bind would call socket.getfqdn(), a DNS lookup that can hang offline.
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]

    def finish_request(self, request, client_address):
        if self.tls is not None:
            try:
                request.settimeout(10)
                request = self.tls.wrap_socket(request, server_side=True)
                request.settimeout(None)
            except (OSError, ssl.SSLError) as error:
                with self.log_lock:
                    with open(self.log_path, "a") as log:
                        log.write(f"TLS-FAILED {error}\n")
                request.close()
                return
        super().finish_request(request, client_address)


# OpenSSL's SSL_OP_NO_EXTENDED_MASTER_SECRET (bit 0; Python's ssl module has no name for it).
OP_NO_EXTENDED_MASTER_SECRET = 0x1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="origin")
    parser.add_argument("--log", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--tls-version", choices=["1.0", "1.1", "1.2", "1.3", "any"], default="any")
    parser.add_argument("--group", help="the only key-exchange group offered (OpenSSL curve name, e.g. prime256v1)")
    parser.add_argument("--no-ems", action="store_true", help="refuse the extended master secret (TLS 1.2)")
    parser.add_argument("--lifetime", type=float, default=300, help="exit after this many seconds")
    parser.add_argument("--files", help="directory served under /files/")
    args = parser.parse_args()
    # Bounded: the server stops by itself even if the test that started it dies.
    stopper = threading.Timer(args.lifetime, lambda: os._exit(0))
    stopper.daemon = True
    stopper.start()

    server = Server(("127.0.0.1", args.port), Handler)
    server.name = args.name
    server.files = args.files
    server.log_path = args.log
    server.log_lock = threading.Lock()
    server.connection_numbers = itertools.count(1)
    open(args.log, "a").close()
    server.tls = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        context.set_alpn_protocols(["http/1.1"])
        versions = {
            "1.0": ssl.TLSVersion.TLSv1,
            "1.1": ssl.TLSVersion.TLSv1_1,
            "1.2": ssl.TLSVersion.TLSv1_2,
            "1.3": ssl.TLSVersion.TLSv1_3,
        }
        if args.tls_version in versions:
            if args.tls_version in ("1.0", "1.1"):
                context.set_ciphers("DEFAULT@SECLEVEL=0")
            context.minimum_version = versions[args.tls_version]
            context.maximum_version = versions[args.tls_version]
        if args.group:
            # With OpenSSL 3 this sets the group list to this one group, for TLS 1.2 and 1.3 alike.
            context.set_ecdh_curve(args.group)
        if args.no_ems:
            context.options |= OP_NO_EXTENDED_MASTER_SECRET
        server.tls = context
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
