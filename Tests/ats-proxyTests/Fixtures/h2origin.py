#!/usr/bin/env python3
"""HTTP/2 and HTTP/1.1 test origin for the end-to-end tests (python3-h2 + asyncio + ssl).

Run with /usr/bin/python3 (Debian's python3-h2). Binds 127.0.0.1 only and exits by itself after
--lifetime seconds. Prints `READY <port>` as its first stdout line once it listens.

  --port N                   0 picks a free port
  --cert F --key F           TLS (without them: cleartext, h2 prior knowledge or HTTP/1.1 by preface)
  --alpn h2|http/1.1|both    ALPN the server accepts. h2: HTTP/2 only (also when the client offers
                             no ALPN overlap: the connection is spoken as h2 anyway); http/1.1: a
                             plain HTTP/1.1 server; both: whatever the client picks (HTTP/1.1 when
                             nothing was negotiated)
  --tls-version 1.2|1.3|any  pin the TLS version
  --max-concurrent-streams N SETTINGS_MAX_CONCURRENT_STREAMS (h2)
  --lifetime SECONDS         default 300
  --log FILE                 one line per request and per event (format below)

Routes (both protocols; GET unless noted):
  /tiny                 200 "ok"
  /echo (POST/PUT)      200 with the request body; x-body-sha256 and x-request-length
  /bytes?n=N            N deterministic bytes with x-body-sha256 (and content-length unless
                        &chunked=1: HTTP/1.1 chunked, h2 without content-length)
  /slow?n=N&chunk=C&delay=MS
                        N bytes in C-byte pieces (default 16384) with MS ms between pieces
                        (default 10); h2 honours flow control, HTTP/1.1 waits for the socket
  /trailers             a body, then the trailer x-checksum: <sha256 of the body>
  /reset                h2: head and 1000 bytes of an announced 100000, then RST_STREAM
                        INTERNAL_ERROR; HTTP/1.1: the same head and bytes, then the connection is
                        closed without TLS close_notify
  /http11-required      h2: RST_STREAM HTTP_1_1_REQUIRED before any response (RFC 9113 8.7, as IIS
                        does for NTLM); HTTP/1.1: 200 "http/1.1\\n" (the protocol that carried it)
  /status/NNN           that status ("status NNN\\n", no body for 204 and 304)
  /headers              the request's header fields (h2: pseudo-headers first) as a JSON list of
                        [name, value] pairs
  /early-hints          103 (link: </style.css>; rel=preload; as=style), then 200 "ok"
Every response carries x-origin: <name> and x-protocol: h2|http/1.1.

Log lines (space-separated key=value after a keyword; one per line):
  READY port=P
  CONNECTION-OPENED conn=C protocol=h2|http/1.1 alpn=A sni=S
  SETTINGS conn=C NAME=VALUE ...                  the client's SETTINGS (h2)
  REQUEST conn=C protocol=P stream=S method=M path=/p authority=A length=L sha256=H
  RESPONSE-COMPLETE conn=C protocol=P stream=S path=/p sent=N
  STALLED conn=C protocol=P stream=S path=/p sent=K of=N     could not send for 1 s (flow
                                                             control or a full socket)
  RESET stream=S code=E conn=C path=/p sent=K                the client reset a stream (h2)
  RESET-SENT stream=S code=E conn=C path=/p                  /reset and /http11-required on h2
  CLIENT-CLOSED-EARLY conn=C protocol=http/1.1 path=/p sent=K of=N
  GOAWAY-RECEIVED conn=C code=E last_stream=S
  PROTOCOL-ERROR conn=C error=...
  CONNECTION-CLOSED conn=C protocol=P
  TLS-FAILED error=...
"""

import argparse
import asyncio
import hashlib
import itertools
import json
import os
import ssl
import sys
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

# The 1 MiB pattern of origin.py, bytes((i * 7 + 13) % 251 for i in range(1 << 20)), built from its
# 251-byte period (fast start).
BLOCK = (bytes((i * 7 + 13) % 251 for i in range(251)) * ((1 << 20) // 251 + 1))[: 1 << 20]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STALL_SECONDS = 1.0
_sha_cache = {}


def payload_chunks(n, size=len(BLOCK)):
    """N deterministic bytes (the 1 MiB pattern of origin.py, repeated) in pieces of `size`."""
    sent = 0
    while sent < n:
        start = sent % len(BLOCK)
        piece = min(size, n - sent, len(BLOCK) - start)
        yield BLOCK[start : start + piece]
        sent += piece


def sha256_of_payload(n):
    if n not in _sha_cache:
        digest = hashlib.sha256()
        for chunk in payload_chunks(n):
            digest.update(chunk)
        _sha_cache[n] = digest.hexdigest()
    return _sha_cache[n]


class Log:
    """Appends one line per event to the --log file (and keeps nothing in memory)."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None

    def write(self, keyword, **fields):
        if self.file is None:
            return
        parts = [keyword] + [f"{key}={value}" for key, value in fields.items()]
        self.file.write(" ".join(parts) + "\n")


class Route:
    """What one request asks for, independent of the protocol that carried it."""

    def __init__(self, method, target):
        url = urllib.parse.urlsplit(target)
        self.method = method
        self.path = url.path
        self.query = {key: values[-1] for key, values in urllib.parse.parse_qs(url.query).items()}

    def number(self, name, default):
        try:
            return int(self.query.get(name, default))
        except ValueError:
            return default


TRAILER_BODY = b"".join(b"trailer body line %d\n" % i for i in range(200))


class H2Server:
    """One HTTP/2 connection: a reader loop feeding h2, one task per answered stream."""

    def __init__(self, origin, reader, writer, conn_id, prefix=b""):
        self.origin = origin
        self.log = origin.log
        self.reader = reader
        self.writer = writer
        self.conn_id = conn_id
        self.prefix = prefix
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        # python-h2 closes the whole connection when a GOAWAY arrives; RFC 9113 6.8 lets the
        # streams up to last_stream_id finish, so this connection stays open for them.
        machine = self.conn.state_machine
        machine._transitions = dict(machine._transitions)
        open_state = h2.connection.ConnectionState.SERVER_OPEN
        machine._transitions[(open_state, h2.connection.ConnectionInputs.RECV_GOAWAY)] = (None, open_state)
        self.streams = {}
        self.tasks = {}
        self.windows = {}

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)

    def wake(self, stream_id=None):
        if stream_id:
            event = self.windows.get(stream_id)
            if event:
                event.set()
        else:
            for event in self.windows.values():
                event.set()

    async def run(self):
        self.conn.initiate_connection()
        if self.origin.args.max_concurrent_streams is not None:
            self.conn.update_settings(
                {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.origin.args.max_concurrent_streams}
            )
        self.flush()
        data = self.prefix
        try:
            while True:
                if not data:
                    data = await self.reader.read(65536)
                    if not data:
                        break
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError as error:
                    self.log.write("PROTOCOL-ERROR", conn=self.conn_id, error=repr(str(error)))
                    self.flush()
                    break
                data = b""
                for event in events:
                    self.dispatch(event)
                self.flush()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            for task in list(self.tasks.values()):
                task.cancel()
            self.log.write("CONNECTION-CLOSED", conn=self.conn_id, protocol="h2")
            try:
                self.writer.close()
            except (ConnectionError, ssl.SSLError, OSError, RuntimeError):
                pass

    def dispatch(self, event):
        if isinstance(event, h2.events.RequestReceived):
            self.streams[event.stream_id] = {
                "headers": list(event.headers),
                "body": bytearray(),
                "digest": hashlib.sha256(),
                "length": 0,
            }
        elif isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream["digest"].update(event.data)
                stream["length"] += len(event.data)
                if len(stream["body"]) < 64 << 20:
                    stream["body"] += event.data
            if event.flow_controlled_length:
                try:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                except h2.exceptions.StreamClosedError:
                    pass
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                self.start(event.stream_id, stream)
        elif isinstance(event, h2.events.StreamReset):
            stream = self.streams.get(event.stream_id, {})
            self.log.write(
                "RESET", stream=event.stream_id, code=int(event.error_code), conn=self.conn_id,
                path=stream.get("path", "-"), sent=stream.get("sent", 0))
            task = self.tasks.pop(event.stream_id, None)
            if task:
                task.cancel()
            self.wake(event.stream_id)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            if isinstance(event, h2.events.RemoteSettingsChanged):
                fields = {}
                for code, change in event.changed_settings.items():
                    name = code.name if hasattr(code, "name") else str(code)
                    fields[name] = change.new_value
                self.log.write("SETTINGS", conn=self.conn_id, **fields)
            self.wake(getattr(event, "stream_id", 0) or None)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.log.write(
                "GOAWAY-RECEIVED", conn=self.conn_id, code=int(event.error_code), last_stream=event.last_stream_id)

    def start(self, stream_id, stream):
        headers = dict(stream["headers"])
        stream["path"] = headers.get(":path", "/")
        body = bytes(stream["body"])
        self.log.write(
            "REQUEST", conn=self.conn_id, protocol="h2", stream=stream_id, method=headers.get(":method", "-"),
            path=stream["path"], authority=headers.get(":authority", "-"), length=stream["length"],
            sha256=stream["digest"].hexdigest())
        stream["body"] = bytearray()
        task = asyncio.ensure_future(self.respond(stream_id, stream, headers, body))
        self.tasks[stream_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(stream_id, None))

    def send_headers(self, stream_id, status, extra=(), end_stream=False):
        fields = [(":status", str(status)), ("x-origin", self.origin.args.name), ("x-protocol", "h2")]
        self.conn.send_headers(stream_id, fields + list(extra), end_stream=end_stream)
        self.flush()

    async def send_body(self, stream_id, stream, pieces, total, delay=0.0, end_stream=True):
        """Sends `pieces` within the flow-control windows, waiting for WINDOW_UPDATE when they are 0."""
        stream["sent"] = 0
        for piece in pieces:
            offset = 0
            while offset < len(piece):
                window = self.conn.local_flow_control_window(stream_id)
                if window <= 0:
                    await self.wait_for_window(stream_id, stream, total)
                    continue
                size = min(window, len(piece) - offset, self.conn.max_outbound_frame_size)
                self.conn.send_data(stream_id, piece[offset : offset + size])
                offset += size
                stream["sent"] += size
                self.flush()
                await self.writer.drain()
            if delay:
                await asyncio.sleep(delay)
        if end_stream:
            self.conn.end_stream(stream_id)
            self.flush()
            self.completed(stream_id, stream)

    def completed(self, stream_id, stream):
        self.log.write(
            "RESPONSE-COMPLETE", conn=self.conn_id, protocol="h2", stream=stream_id, path=stream["path"],
            sent=stream.get("sent", 0))

    async def wait_for_window(self, stream_id, stream, total):
        event = self.windows.setdefault(stream_id, asyncio.Event())
        event.clear()
        try:
            await asyncio.wait_for(event.wait(), STALL_SECONDS)
        except asyncio.TimeoutError:
            self.log.write(
                "STALLED", conn=self.conn_id, protocol="h2", stream=stream_id, path=stream["path"],
                sent=stream["sent"], of=total)
            await event.wait()

    async def respond(self, stream_id, stream, headers, body):
        route = Route(headers.get(":method", "GET"), headers.get(":path", "/"))
        head_only = route.method == "HEAD"
        try:
            if route.path == "/tiny":
                await self.simple(stream_id, stream, 200, b"ok", head_only)
            elif route.path == "/echo":
                extra = [("x-body-sha256", hashlib.sha256(body).hexdigest()), ("x-request-length", str(len(body)))]
                await self.simple(stream_id, stream, 200, body, head_only, extra, "application/octet-stream")
            elif route.path in ("/bytes", "/slow"):
                n = max(0, route.number("n", 0))
                slow = route.path == "/slow"
                extra = [("content-type", "application/octet-stream"), ("x-body-sha256", sha256_of_payload(n))]
                if slow or route.query.get("chunked") != "1":
                    extra.append(("content-length", str(n)))
                self.send_headers(stream_id, 200, extra, end_stream=head_only or n == 0)
                if not head_only and n:
                    size = max(1, route.number("chunk", 16384)) if slow else 1 << 20
                    delay = max(0, route.number("delay", 10)) / 1000 if slow else 0
                    await self.send_body(stream_id, stream, payload_chunks(n, size), n, delay)
            elif route.path == "/trailers":
                extra = [("content-type", "text/plain"), ("trailer", "x-checksum")]
                self.send_headers(stream_id, 200, extra)
                await self.send_body(stream_id, stream, [TRAILER_BODY], len(TRAILER_BODY), end_stream=False)
                self.conn.send_headers(
                    stream_id, [("x-checksum", hashlib.sha256(TRAILER_BODY).hexdigest())], end_stream=True)
                self.flush()
                self.completed(stream_id, stream)
            elif route.path == "/reset":
                self.send_headers(stream_id, 200, [("content-length", "100000")])
                await self.send_body(stream_id, stream, [b"r" * 1000], 100000, end_stream=False)
                await asyncio.sleep(0.2)
                self.conn.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
                self.flush()
                self.log.write(
                    "RESET-SENT", stream=stream_id, code=int(h2.errors.ErrorCodes.INTERNAL_ERROR), conn=self.conn_id,
                    path=route.path)
            elif route.path == "/http11-required":
                code = h2.errors.ErrorCodes.HTTP_1_1_REQUIRED
                self.conn.reset_stream(stream_id, error_code=code)
                self.flush()
                self.log.write("RESET-SENT", stream=stream_id, code=int(code), conn=self.conn_id, path=route.path)
            elif route.path.startswith("/status/"):
                code = int(route.path.rsplit("/", 1)[1] or "0")
                if code in (204, 304):
                    self.send_headers(stream_id, code, end_stream=True)
                else:
                    await self.simple(stream_id, stream, code, f"status {code}\n".encode(), head_only)
            elif route.path == "/headers":
                text = json.dumps([[name, value] for name, value in stream["headers"]]).encode()
                await self.simple(stream_id, stream, 200, text, head_only, content_type="application/json")
            elif route.path == "/early-hints":
                self.conn.send_headers(stream_id, [(":status", "103"), ("link", "</style.css>; rel=preload; as=style")])
                self.flush()
                await asyncio.sleep(0.05)
                await self.simple(stream_id, stream, 200, b"ok", head_only)
            else:
                await self.simple(stream_id, stream, 404, b"not found\n", head_only)
            await self.writer.drain()
        except asyncio.CancelledError:
            pass
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as error:
            self.log.write("STREAM-GONE", conn=self.conn_id, stream=stream_id, error=type(error).__name__)
        except (ConnectionError, ssl.SSLError, OSError):
            pass

    async def simple(self, stream_id, stream, status, body, head_only, extra=(), content_type="text/plain"):
        fields = [("content-type", content_type), ("content-length", str(len(body)))] + list(extra)
        self.send_headers(stream_id, status, fields, end_stream=head_only or not body)
        if body and not head_only:
            await self.send_body(stream_id, stream, [body], len(body))
        else:
            self.completed(stream_id, stream)


class H1Server:
    """One HTTP/1.1 connection with keep-alive, Content-Length and chunked request bodies."""

    def __init__(self, origin, reader, writer, conn_id):
        self.origin = origin
        self.log = origin.log
        self.reader = reader
        self.writer = writer
        self.conn_id = conn_id

    async def run(self):
        try:
            while await self.one_request():
                pass
        except (ConnectionError, ssl.SSLError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self.log.write("CONNECTION-CLOSED", conn=self.conn_id, protocol="http/1.1")
            try:
                self.writer.close()
            except (ConnectionError, ssl.SSLError, OSError, RuntimeError):
                pass

    async def read_body(self, headers):
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                line = await self.reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    return b"".join(parts)
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
        length = int(headers.get("content-length", "0") or "0")
        return await self.reader.readexactly(length) if length else b""

    async def one_request(self):
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = (lines[0].split(" ") + ["", ""])[:3]
        pairs = []
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                pairs.append([name, value.strip()])
        headers = {name.lower(): value for name, value in pairs}
        if headers.get("expect", "").lower() == "100-continue":
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await self.read_body(headers)
        self.log.write(
            "REQUEST", conn=self.conn_id, protocol="http/1.1", stream=0, method=method, path=target,
            authority=headers.get("host", "-"), length=len(body), sha256=hashlib.sha256(body).hexdigest())
        keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        self.path = target
        self.sent = 0
        self.total = 0
        self.completed = False
        try:
            keep_alive = await self.respond(Route(method, target), pairs, body) and keep_alive
            await self.writer.drain()
        except (ConnectionError, ssl.SSLError, OSError) as error:
            if self.completed:
                return False
            self.log.write(
                "CLIENT-CLOSED-EARLY", conn=self.conn_id, protocol="http/1.1", path=target, sent=self.sent,
                of=self.total, error=type(error).__name__)
            return False
        return keep_alive

    def head(self, status, fields, reason="OK"):
        lines = [f"HTTP/1.1 {status} {reason}", f"X-Origin: {self.origin.args.name}", "X-Protocol: http/1.1"]
        lines += [f"{name}: {value}" for name, value in fields]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def write(self, data):
        """Writes and waits for the socket; logs STALLED once when that takes a second or more."""
        self.writer.write(data)
        self.sent += len(data)
        try:
            await asyncio.wait_for(asyncio.shield(self.writer.drain()), STALL_SECONDS)
        except asyncio.TimeoutError:
            if not self.stalled:
                self.stalled = True
                self.log.write(
                    "STALLED", conn=self.conn_id, protocol="http/1.1", stream=0, path=self.path, sent=self.sent,
                    of=self.total)
            await self.writer.drain()

    def complete(self):
        self.completed = True
        self.log.write(
            "RESPONSE-COMPLETE", conn=self.conn_id, protocol="http/1.1", stream=0, path=self.path, sent=self.sent)

    async def simple(self, status, body, head_only, extra=(), content_type="text/plain"):
        self.total = len(body)
        self.head(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))] + list(extra))
        if not head_only and body:
            await self.write(body)
        self.complete()

    async def respond(self, route, pairs, body):
        """Answers one request; False when the connection must close afterwards."""
        head_only = route.method == "HEAD"
        self.stalled = False
        if route.path == "/tiny":
            await self.simple(200, b"ok", head_only)
        elif route.path == "/echo":
            extra = [("X-Body-SHA256", hashlib.sha256(body).hexdigest()), ("X-Request-Length", str(len(body)))]
            await self.simple(200, body, head_only, extra, "application/octet-stream")
        elif route.path in ("/bytes", "/slow"):
            n = max(0, route.number("n", 0))
            self.total = n
            slow = route.path == "/slow"
            chunked = not slow and route.query.get("chunked") == "1"
            fields = [("Content-Type", "application/octet-stream"), ("X-Body-SHA256", sha256_of_payload(n))]
            fields.append(("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(n)))
            self.head(200, fields)
            if not head_only:
                size = max(1, route.number("chunk", 16384)) if slow else (300000 if chunked else 1 << 20)
                delay = max(0, route.number("delay", 10)) / 1000 if slow else 0
                for piece in payload_chunks(n, size):
                    if chunked:
                        self.writer.write(b"%x\r\n" % len(piece))
                    await self.write(piece)
                    if chunked:
                        self.writer.write(b"\r\n")
                    if delay:
                        await asyncio.sleep(delay)
                if chunked:
                    self.writer.write(b"0\r\n\r\n")
            self.complete()
        elif route.path == "/trailers":
            self.total = len(TRAILER_BODY)
            self.head(200, [("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked"), ("Trailer", "x-checksum")])
            self.writer.write(b"%x\r\n" % len(TRAILER_BODY))
            await self.write(TRAILER_BODY)
            checksum = hashlib.sha256(TRAILER_BODY).hexdigest()
            self.writer.write(b"\r\n0\r\nx-checksum: " + checksum.encode() + b"\r\n\r\n")
            self.complete()
        elif route.path == "/reset":
            self.total = 100000
            self.head(200, [("Content-Length", "100000")])
            await self.write(b"r" * 1000)
            await asyncio.sleep(0.2)
            self.log.write("RESET-SENT", stream=0, code="close", conn=self.conn_id, path=route.path)
            self.completed = True
            self.writer.transport.abort()
            return False
        elif route.path == "/http11-required":
            await self.simple(200, b"http/1.1\n", head_only)
        elif route.path.startswith("/status/"):
            code = int(route.path.rsplit("/", 1)[1] or "0")
            if code in (204, 304):
                self.head(code, [], reason="Status")
                self.complete()
            else:
                await self.simple(code, f"status {code}\n".encode(), head_only)
        elif route.path == "/headers":
            await self.simple(200, json.dumps(pairs).encode(), head_only, content_type="application/json")
        elif route.path == "/early-hints":
            self.writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n")
            await self.writer.drain()
            await asyncio.sleep(0.05)
            await self.simple(200, b"ok", head_only)
        else:
            await self.simple(404, b"not found\n", head_only)
        return True


class Origin:
    """The listener: TLS handshake (with the ALPN policy), then an H2Server or H1Server per connection."""

    def __init__(self, args):
        self.args = args
        self.log = Log(args.log)
        self.numbers = itertools.count(1)
        self.tasks = set()
        self.context = None
        if args.cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(args.cert, args.key)
            offers = {"h2": ["h2"], "http/1.1": ["http/1.1"], "both": ["h2", "http/1.1"]}[args.alpn]
            context.set_alpn_protocols(offers)
            versions = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
            if args.tls_version in versions:
                context.minimum_version = versions[args.tls_version]
                context.maximum_version = versions[args.tls_version]
            self.names = {}

            def remember_sni(ssl_object, name, _context):
                self.names[id(ssl_object)] = name

            context.sni_callback = remember_sni
            self.context = context

    def accepted(self, transport):
        """Called from connection_made with reading paused, so no byte can reach the wrong protocol."""
        task = asyncio.ensure_future(self.connection(transport))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def connection(self, transport):
        conn_id = next(self.numbers)
        alpn = "-"
        sni = "-"
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        protocol = asyncio.StreamReaderProtocol(reader)
        if self.context is not None:
            try:
                transport = await loop.start_tls(
                    transport, protocol, self.context, server_side=True, ssl_handshake_timeout=10)
            except (ssl.SSLError, ConnectionError, OSError, asyncio.TimeoutError) as error:
                self.log.write("TLS-FAILED", conn=conn_id, error=repr(str(error) or type(error).__name__))
                transport.abort()
                return
            ssl_object = transport.get_extra_info("ssl_object")
            alpn = ssl_object.selected_alpn_protocol() or "-"
            sni = self.names.pop(id(ssl_object), None) or "-"
            protocol.connection_made(transport)
        else:
            transport.set_protocol(protocol)
            protocol.connection_made(transport)
            transport.resume_reading()
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            prefix = b""
            if self.args.alpn == "h2" or alpn == "h2":
                kind = "h2"
            elif self.args.alpn == "http/1.1" or self.context is not None:
                kind = "http/1.1"
            else:
                # Cleartext "both": the client's first bytes say which protocol it speaks.
                try:
                    prefix = await reader.readexactly(len(PREFACE))
                except asyncio.IncompleteReadError as partial:
                    prefix = partial.partial
                kind = "h2" if prefix == PREFACE else "http/1.1"
                if kind == "http/1.1":
                    reader._buffer[:0] = prefix  # put the bytes back for the HTTP/1.1 parser
                    prefix = b""
            self.log.write("CONNECTION-OPENED", conn=conn_id, protocol=kind, alpn=alpn, sni=sni)
            if kind == "h2":
                await H2Server(self, reader, writer, conn_id, prefix).run()
            else:
                await H1Server(self, reader, writer, conn_id).run()
        except Exception as error:  # a fixture must never die on one connection
            self.log.write("CONNECTION-ERROR", conn=conn_id, error=repr(error))
            writer.transport.abort()


class Accepting(asyncio.Protocol):
    """Holds a fresh connection with reading paused until Origin.connection takes it over."""

    def __init__(self, origin):
        self.origin = origin

    def connection_made(self, transport):
        transport.pause_reading()
        self.origin.accepted(transport)


async def serve(args):
    origin = Origin(args)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Accepting(origin), "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    origin.log.write("READY", port=port)
    print(f"READY {port}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description="HTTP/2 + HTTP/1.1 test origin")
    parser.add_argument("--name", default="h2origin")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--alpn", choices=["h2", "http/1.1", "both"], default="both")
    parser.add_argument("--tls-version", choices=["1.2", "1.3", "any"], default="any")
    parser.add_argument("--max-concurrent-streams", type=int)
    parser.add_argument("--lifetime", type=float, default=300, help="exit after this many seconds")
    parser.add_argument("--log")
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    # Bounded: the server stops by itself even if the test that started it dies.
    loop.call_later(args.lifetime, os._exit, 0)
    try:
        loop.run_until_complete(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
