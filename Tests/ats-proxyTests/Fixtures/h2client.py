#!/usr/bin/env python3
"""HTTP/2 test client for the end-to-end tests: well-behaved (python3-h2) and hostile (raw frames).

Run with /usr/bin/python3 (Debian's python3-h2, hyperframe, hpack). It reaches the server either
through an explicit proxy (`--proxy PORT`: CONNECT HOST:PORT, then TLS inside the tunnel) or
directly (`--direct PORT`, to check the tooling against an origin). Every run is bounded by
--timeout. Output: one JSON object per line as things happen (flushed, so a test can react to
`{"event": "response", ...}`), then a last line {"event": "summary", ...}.

  h2client.py --proxy P --connect a.test:443 [--sni a.test] [--cacert CA] [--timeout 20] \\
      requests --spec '[{"path": "/tiny"}, ...]' [--sequential] [--linger S] [--window N]
  h2client.py --proxy P --connect a.test:443 --cacert CA hostile NAME

A request spec: {"method": "GET", "path": "/tiny", "authority": "a.test:443" (default: --connect),
"headers": [["x-a", "1"]], "body_size": N, "body_seed": K (deterministic body of N bytes),
"reset_after": BYTES (send RST_STREAM CANCEL once that many body bytes arrived),
"pause_seconds": S (send no WINDOW_UPDATE for S seconds after the response head: a reader
that stops reading)}.

requests summary: {"alpn", "server_settings", "streams": [{"index", "id", "status",
"informational": [103], "headers": {name: value}, "length", "sha256", "trailers": {...},
"ended", "reset": code|null, "reset_by_us", "refused"}], "goaways": [[code, last_stream_id]],
"closed", "timed_out"}. A stream above a GOAWAY's last_stream_id that never started is "refused".

hostile NAME (raw frames with hyperframe/hpack after the preface and SETTINGS exchange):
  settings-bad-length     SETTINGS with a 5-byte payload
  uppercase-header        stream 1 carries "X-Upper: 1"; stream 3 is a normal GET
  oversized-header-list   stream 1 carries 40 x 2000-byte fields (> 64 KiB, over CONTINUATION);
                          stream 3 is a normal GET
  too-many-streams        101 open streams (POST without END_STREAM) after acknowledging SETTINGS
  even-stream-id          HEADERS on stream 2
  lower-stream-id         HEADERS on stream 5, then on stream 3
  reused-stream-id        HEADERS with END_STREAM on stream 1 twice
  rapid-reset             1000 x (HEADERS + RST_STREAM CANCEL)
  continuation-flood      HEADERS without END_HEADERS, then 50 CONTINUATION frames
  zero-window             SETTINGS_INITIAL_WINDOW_SIZE=0, GET /bytes?n=1000000, never a WINDOW_UPDATE
                          (prints {"event": "stalled"}, then holds the connection --hold seconds,
                          default 3, or until the --release file exists)
  ping                    PING with opaque data "ats-ping"
  made-you-reset          --count x (HEADERS GET /bytes?n=1000000&made-you-reset=1 + a WINDOW_UPDATE that
                          overflows the stream's window, so the server must reset it), one stream per write
  ping-flood-no-read      PINGs (or, with --frame settings, empty SETTINGS) 100 per write, 2 ms apart, for --hold seconds,
                          never reading after the SETTINGS exchange; prints {"event": "blocked"} when a write
                          first stalls (then only watches); "closed" once the TCP state leaves ESTABLISHED
hostile summary: {"goaways": [[code, last]], "resets": [[stream, code]], "statuses": {stream: status},
"data": {stream: bytes}, "ended": [streams], "closed", "server_settings", "ping_acks": [hex]}.
"""

import argparse
import hashlib
import json
import os
import select
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack
import hyperframe.frame as frames

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# The 1 MiB pattern of origin.py, bytes((i * 7 + 13) % 251 for i in range(1 << 20)), built from its
# 251-byte period (fast start).
BLOCK = (bytes((i * 7 + 13) % 251 for i in range(251)) * ((1 << 20) // 251 + 1))[: 1 << 20]


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def body_bytes(size, seed):
    """`size` deterministic bytes: the fixtures' 1 MiB pattern rotated by `seed`."""
    rotated = BLOCK[seed % len(BLOCK) :] + BLOCK[: seed % len(BLOCK)]
    whole, rest = divmod(size, len(rotated))
    return rotated * whole + rotated[:rest]


def open_connection(args):
    """TCP to the proxy (CONNECT, then TLS in the tunnel) or straight to the server; returns the TLS socket."""
    host, _, port = args.connect.rpartition(":")
    sock = socket.create_connection(("127.0.0.1", args.proxy or args.direct), timeout=10)
    if args.proxy:
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            part = sock.recv(1)
            if not part:
                break
            head += part
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        if " 200" not in status_line:
            emit(event="connect-failed", status_line=status_line)
            emit(event="summary", error="connect failed: " + status_line)
            sys.exit(3)
    if args.cacert:
        context = ssl.create_default_context(cafile=args.cacert)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(args.alpn.split(","))
    tls = context.wrap_socket(sock, server_hostname=args.sni or host)
    emit(event="connected", alpn=tls.selected_alpn_protocol(), tls=tls.version())
    return tls


TCP_STATES = {1: "ESTABLISHED", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT"}


def tcp_state(sock):
    """The kernel's TCP state of `sock` (TCP_INFO), without reading from it; None if unknown."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
    except OSError:
        return None
    return TCP_STATES.get(info[0], str(info[0]))


def readable(tls, timeout):
    if tls.pending():
        return True
    ready, _, _ = select.select([tls], [], [], timeout)
    return bool(ready)


# MARK: - Well-behaved client (python3-h2)


def keep_open_after_goaway(conn, state):
    """python-h2 closes the whole connection when a GOAWAY arrives and then rejects every frame;
    RFC 9113 6.8 lets the streams up to last_stream_id finish, so stay open on this instance."""
    machine = conn.state_machine
    machine._transitions = dict(machine._transitions)
    machine._transitions[(state, h2.connection.ConnectionInputs.RECV_GOAWAY)] = (None, state)


class Stream:
    """One request of the spec and what came back for it."""

    def __init__(self, index, spec, default_authority):
        self.index = index
        self.spec = spec
        self.authority = spec.get("authority", default_authority)
        self.id = None
        self.status = None
        self.informational = []
        self.headers = {}
        self.trailers = {}
        self.length = 0
        self.digest = hashlib.sha256()
        self.ended = False
        self.reset = None
        self.reset_by_us = False
        self.refused = False
        size = spec.get("body_size")
        self.body = body_bytes(size, spec.get("body_seed", index)) if size is not None else None
        self.body_offset = 0
        self.paused_until = None
        self.unacked = 0

    @property
    def done(self):
        return self.ended or self.reset is not None or self.refused

    def summary(self):
        return {
            "index": self.index, "id": self.id, "status": self.status, "informational": self.informational,
            "headers": self.headers, "trailers": self.trailers, "length": self.length,
            "sha256": self.digest.hexdigest(), "ended": self.ended, "reset": self.reset,
            "reset_by_us": self.reset_by_us, "refused": self.refused,
            "request_sha256": hashlib.sha256(self.body).hexdigest() if self.body is not None else None,
        }


class Client:
    """Runs a list of requests over one h2 connection, honouring flow control both ways."""

    def __init__(self, tls, args, specs):
        self.tls = tls
        self.args = args
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        keep_open_after_goaway(self.conn, h2.connection.ConnectionState.CLIENT_OPEN)
        self.streams = [Stream(index, spec, args.connect) for index, spec in enumerate(specs)]
        self.by_id = {}
        self.goaways = []
        self.closed = False
        self.server_settings = {}

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.tls.sendall(data)

    def start(self, stream):
        stream.id = self.conn.get_next_available_stream_id()
        self.by_id[stream.id] = stream
        spec = stream.spec
        method = spec.get("method", "POST" if stream.body is not None else "GET")
        headers = [(":method", method), (":scheme", "https"), (":authority", stream.authority),
                   (":path", spec.get("path", "/"))]
        headers += [(name, value) for name, value in spec.get("headers", [])]
        if stream.body is not None:
            headers.append(("content-length", str(len(stream.body))))
        self.conn.send_headers(stream.id, headers, end_stream=stream.body is None)
        emit(event="request", index=stream.index, id=stream.id, path=spec.get("path", "/"))

    def send_bodies(self):
        for stream in self.streams:
            if stream.id is None or stream.body is None or stream.done or stream.body_offset < 0:
                continue
            while stream.body_offset < len(stream.body):
                try:
                    window = self.conn.local_flow_control_window(stream.id)
                except h2.exceptions.StreamClosedError:
                    stream.body_offset = -1
                    break
                size = min(window, self.conn.max_outbound_frame_size, len(stream.body) - stream.body_offset)
                if size <= 0:
                    break
                self.conn.send_data(stream.id, stream.body[stream.body_offset : stream.body_offset + size])
                stream.body_offset += size
                self.flush()
            if stream.body_offset == len(stream.body):
                self.conn.end_stream(stream.id)
                stream.body_offset = -1

    def handle(self, event):
        stream = self.by_id.get(getattr(event, "stream_id", None) or -1)
        if isinstance(event, h2.events.ResponseReceived):
            stream.status = int(dict(event.headers)[":status"])
            stream.headers = {name: value for name, value in event.headers}
            emit(event="response", index=stream.index, id=stream.id, status=stream.status)
            pause = stream.spec.get("pause_seconds")
            if pause:
                stream.paused_until = time.monotonic() + pause
                emit(event="paused", index=stream.index, id=stream.id)
        elif isinstance(event, h2.events.InformationalResponseReceived):
            stream.informational.append(int(dict(event.headers)[":status"]))
        elif isinstance(event, h2.events.DataReceived):
            stream.digest.update(event.data)
            stream.length += len(event.data)
            if stream.paused_until is not None:
                # Only the stream stops reading: the connection window is returned, so other
                # streams keep flowing while this one is held at its 64 KiB window.
                stream.unacked += event.flow_controlled_length
                if event.flow_controlled_length:
                    self.conn.increment_flow_control_window(event.flow_controlled_length)
            elif event.flow_controlled_length:
                self.ack(event.flow_controlled_length, stream.id)
            limit = stream.spec.get("reset_after")
            if limit is not None and stream.length >= limit and stream.reset is None and not stream.ended:
                self.conn.reset_stream(stream.id, error_code=h2.errors.ErrorCodes.CANCEL)
                stream.reset = int(h2.errors.ErrorCodes.CANCEL)
                stream.reset_by_us = True
                emit(event="reset-sent", index=stream.index, id=stream.id, received=stream.length)
        elif isinstance(event, h2.events.TrailersReceived):
            stream.trailers = {name: value for name, value in event.headers}
        elif isinstance(event, h2.events.StreamEnded):
            stream.ended = True
            emit(event="end", index=stream.index, id=stream.id, length=stream.length)
        elif isinstance(event, h2.events.StreamReset):
            if stream is not None and not stream.reset_by_us:
                stream.reset = int(event.error_code)
                emit(event="reset", index=stream.index, id=stream.id, code=stream.reset, received=stream.length)
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for code, change in event.changed_settings.items():
                self.server_settings[getattr(code, "name", str(code))] = change.new_value
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaways.append([int(event.error_code), event.last_stream_id])
            emit(event="goaway", code=int(event.error_code), last_stream_id=event.last_stream_id)
            for other in self.streams:
                if other.id is not None and other.id > event.last_stream_id and not other.done:
                    other.refused = True
                elif other.id is None:
                    other.refused = True

    def ack(self, length, stream_id):
        try:
            self.conn.acknowledge_received_data(length, stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass

    def run(self, deadline):
        self.conn.initiate_connection()
        if self.args.window:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.args.window})
        self.flush()
        pending = list(self.streams)
        timed_out = False
        while True:
            if time.monotonic() > deadline:
                timed_out = True
                break
            if not self.goaways:
                while pending and (not self.args.sequential or all(s.done for s in self.streams if s.id)):
                    self.start(pending.pop(0))
                    if self.args.sequential:
                        break
            self.send_bodies()
            now = time.monotonic()
            for stream in self.streams:
                if stream.paused_until is not None and now >= stream.paused_until:
                    stream.paused_until = None
                    emit(event="resumed", index=stream.index, id=stream.id, received=stream.length)
                    if stream.unacked and not stream.done:
                        self.conn.increment_flow_control_window(stream.unacked, stream_id=stream.id)
                    stream.unacked = 0
            self.flush()
            if not pending and all(stream.done for stream in self.streams):
                break
            if not readable(self.tls, 0.05):
                continue
            try:
                data = self.tls.recv(65536)
            except (ssl.SSLError, OSError) as error:
                emit(event="socket-error", error=str(error))
                data = b""
            if not data:
                self.closed = True
                emit(event="closed")
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError as error:
                emit(event="protocol-error", error=str(error))
                self.flush()
                break
            for event in events:
                self.handle(event)
            self.flush()
        linger_until = time.monotonic() + self.args.linger
        while not self.closed and time.monotonic() < min(linger_until, deadline):
            if not readable(self.tls, 0.05):
                continue
            try:
                data = self.tls.recv(65536)
            except (ssl.SSLError, OSError):
                data = b""
            if not data:
                self.closed = True
                emit(event="closed")
                break
            try:
                for event in self.conn.receive_data(data):
                    self.handle(event)
                self.flush()
            except h2.exceptions.ProtocolError as error:
                emit(event="protocol-error", error=str(error))
                break
        for stream in self.streams:
            if stream.id is None:
                stream.refused = True
        return {
            "server_settings": self.server_settings, "streams": [stream.summary() for stream in self.streams],
            "goaways": self.goaways, "closed": self.closed, "timed_out": timed_out,
        }


# MARK: - Hostile client (raw frames)


class Raw:
    """Writes hand-built frames and records every frame the server sends back."""

    def __init__(self, tls, authority):
        self.tls = tls
        self.authority = authority
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.buffer = b""
        self.goaways = []
        self.resets = []
        self.statuses = {}
        self.data = {}
        self.ended = []
        self.closed = False
        self.server_settings = {}
        self.server_settings_seen = False
        self.settings_acked = False
        self.ping_acks = []
        self.block = None
        self.acknowledge = True

    def send(self, data):
        try:
            self.tls.sendall(data)
        except (ssl.SSLError, OSError) as error:
            emit(event="send-failed", error=str(error))

    def start(self, settings=None):
        self.send(PREFACE + frames.SettingsFrame(0, settings=settings or {}).serialize())
        self.read(5, lambda: self.server_settings_seen)

    def request_block(self, path="/tiny", method="GET", extra=()):
        headers = [(":method", method), (":scheme", "https"), (":authority", self.authority), (":path", path)]
        return self.encoder.encode(headers + list(extra))

    @staticmethod
    def headers_frames(stream, block, end_stream=True, end_headers=True, size=16384):
        """HEADERS (+ CONTINUATION) frames carrying `block`, split at `size` bytes."""
        pieces = [block[offset : offset + size] for offset in range(0, len(block), size)] or [b""]
        first = frames.HeadersFrame(stream, data=pieces[0])
        if end_stream:
            first.flags.add("END_STREAM")
        out = [first]
        for piece in pieces[1:]:
            out.append(frames.ContinuationFrame(stream, data=piece))
        if end_headers:
            out[-1].flags.add("END_HEADERS")
        return b"".join(frame.serialize() for frame in out)

    def read(self, seconds, until=None):
        """Reads frames for up to `seconds`, until `until()` is true or the server closes."""
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            if until is not None and until():
                return
            if not readable(self.tls, 0.05):
                continue
            try:
                data = self.tls.recv(65536)
            except (ssl.SSLError, OSError):
                data = b""
            if not data:
                self.closed = True
                break
            self.buffer += data
            self.parse()

    def parse(self):
        while len(self.buffer) >= 9:
            frame, length = frames.Frame.parse_frame_header(memoryview(self.buffer[:9]), strict=False)
            if len(self.buffer) < 9 + length:
                return
            frame.parse_body(memoryview(self.buffer[9 : 9 + length]))
            self.buffer = self.buffer[9 + length :]
            self.on_frame(frame)

    def on_frame(self, frame):
        if isinstance(frame, frames.SettingsFrame):
            if "ACK" in frame.flags:
                self.settings_acked = True
            else:
                for key, value in frame.settings.items():
                    try:
                        self.server_settings[h2.settings.SettingCodes(key).name] = value
                    except ValueError:
                        self.server_settings[str(key)] = value
                self.server_settings_seen = True
                self.send(frames.SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(frame, frames.PingFrame):
            if "ACK" in frame.flags:
                self.ping_acks.append(frame.opaque_data.hex())
            else:
                self.send(frames.PingFrame(0, opaque_data=frame.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(frame, frames.GoAwayFrame):
            self.goaways.append([frame.error_code, frame.last_stream_id])
            emit(event="goaway", code=frame.error_code, last_stream_id=frame.last_stream_id)
        elif isinstance(frame, frames.RstStreamFrame):
            self.resets.append([frame.stream_id, frame.error_code])
            emit(event="reset", stream=frame.stream_id, code=frame.error_code)
        elif isinstance(frame, (frames.HeadersFrame, frames.ContinuationFrame)):
            self.block = (self.block or b"") + frame.data
            if "END_HEADERS" in frame.flags:
                fields = dict(self.decoder.decode(self.block))
                self.block = None
                status = fields.get(":status") or fields.get(b":status")
                if status is not None and frame.stream_id not in self.statuses:
                    self.statuses[frame.stream_id] = int(status)
                    emit(event="response", stream=frame.stream_id, status=int(status))
            if "END_STREAM" in frame.flags:
                self.ended.append(frame.stream_id)
        elif isinstance(frame, frames.DataFrame):
            self.data[frame.stream_id] = self.data.get(frame.stream_id, 0) + len(frame.data)
            if frame.flow_controlled_length and self.acknowledge:
                self.send(
                    frames.WindowUpdateFrame(0, window_increment=frame.flow_controlled_length).serialize()
                    + frames.WindowUpdateFrame(frame.stream_id, window_increment=frame.flow_controlled_length)
                    .serialize())
            if "END_STREAM" in frame.flags:
                self.ended.append(frame.stream_id)

    def summary(self):
        return {
            "goaways": self.goaways, "resets": self.resets,
            "statuses": {str(key): value for key, value in self.statuses.items()},
            "data": {str(key): value for key, value in self.data.items()}, "ended": self.ended,
            "closed": self.closed, "server_settings": self.server_settings, "ping_acks": self.ping_acks,
        }


def hostile(tls, args):
    raw = Raw(tls, args.connect)
    name = args.name

    def finished(stream):
        return stream in raw.ended or any(reset[0] == stream for reset in raw.resets)

    if name == "settings-bad-length":
        raw.start()
        raw.send(b"\x00\x00\x05\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00")
        raw.read(args.hold)
    elif name == "uppercase-header":
        raw.start()
        raw.send(raw.headers_frames(1, raw.request_block(extra=[("X-Upper", "1")])))
        raw.send(raw.headers_frames(3, raw.request_block()))
        raw.read(args.hold, lambda: finished(3) and any(reset[0] == 1 for reset in raw.resets))
    elif name == "oversized-header-list":
        raw.start()
        big = [hpack.NeverIndexedHeaderTuple(f"x-big-{i}", chr(97 + i % 26) * 2000) for i in range(40)]
        raw.send(raw.headers_frames(1, raw.request_block(extra=big)))
        raw.send(raw.headers_frames(3, raw.request_block()))
        raw.read(args.hold, lambda: finished(3) and (finished(1) or raw.goaways))
    elif name == "too-many-streams":
        raw.start()
        raw.read(2, lambda: raw.settings_acked)
        data = b"".join(
            raw.headers_frames(2 * i + 1, raw.request_block("/echo", "POST"), end_stream=False) for i in range(101))
        raw.send(data)
        raw.read(args.hold)
    elif name == "even-stream-id":
        raw.start()
        raw.send(raw.headers_frames(2, raw.request_block()))
        raw.read(args.hold)
    elif name == "lower-stream-id":
        raw.start()
        raw.send(raw.headers_frames(5, raw.request_block()) + raw.headers_frames(3, raw.request_block()))
        raw.read(args.hold)
    elif name == "reused-stream-id":
        raw.start()
        path = "/slow?n=100000&chunk=10000&delay=100"
        raw.send(raw.headers_frames(1, raw.request_block(path)) + raw.headers_frames(1, raw.request_block(path)))
        raw.read(args.hold)
    elif name == "rapid-reset":
        raw.start()
        data = b""
        for i in range(1000):
            stream = 2 * i + 1
            data += raw.headers_frames(stream, raw.request_block())
            data += frames.RstStreamFrame(stream, error_code=int(h2.errors.ErrorCodes.CANCEL)).serialize()
        raw.send(data)
        raw.read(args.hold)
    elif name == "continuation-flood":
        raw.start()
        data = raw.headers_frames(1, raw.request_block(), end_headers=False)
        for i in range(50):
            data += frames.ContinuationFrame(1, data=raw.encoder.encode([(f"x-{i}", "v")])).serialize()
        raw.send(data)
        raw.read(args.hold)
    elif name == "zero-window":
        raw.acknowledge = False
        raw.start(settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        raw.send(raw.headers_frames(1, raw.request_block("/bytes?n=1000000")))
        raw.read(5, lambda: 1 in raw.statuses or raw.closed)
        emit(event="stalled", received=raw.data.get(1, 0))
        # No WINDOW_UPDATE ever: whatever the server buffers for stream 1 must not stall anyone else.
        # Held until --hold runs out or the test creates the --release file.
        raw.read(args.hold, lambda: args.release is not None and os.path.exists(args.release))
    elif name == "made-you-reset":
        raw.start()
        raw.read(2, lambda: raw.settings_acked)
        block = raw.request_block("/bytes?n=1000000&made-you-reset=1")
        for i in range(args.count):
            stream = 2 * i + 1
            raw.send(raw.headers_frames(stream, block)
                     + frames.WindowUpdateFrame(stream, window_increment=0x7FFFFFFF).serialize())
            if i % 20 == 19:
                raw.read(0.001)
            if raw.closed or raw.goaways:
                break
        emit(event="sent", streams=i + 1)
        raw.read(args.hold, lambda: raw.goaways and raw.closed)
    elif name == "ping-flood-no-read":
        raw.start()
        raw.read(2, lambda: raw.settings_acked)
        if args.frame == "settings":
            frame = frames.SettingsFrame(0).serialize()
        else:
            frame = frames.PingFrame(0, opaque_data=b"floodpng").serialize()
        batch = frame * 100
        # A small receive buffer, and writes paced so that a read rarely holds 1,000 frames (nghttp2's own guard):
        # the proxy's queue, not the kernel's buffers, is what fills.
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        tls.settimeout(1)
        sent = 0
        blocked = False
        state = None
        deadline = time.monotonic() + args.hold
        while time.monotonic() < deadline and not blocked:
            try:
                tls.sendall(batch)
                sent += 100
                time.sleep(0.002)
            except (socket.timeout, ssl.SSLWantWriteError):
                # A TLS write cannot be retried with other bytes: from here on only watch the connection.
                blocked = True
                emit(event="blocked", frames=sent)
            except (ssl.SSLError, OSError) as error:
                emit(event="send-failed", error=str(error), frames=sent)
                break
        while time.monotonic() < deadline:
            state = tcp_state(tls)
            if state not in ("ESTABLISHED", None):
                raw.closed = True
                break
            time.sleep(0.1)
        emit(event="flooded", frames=sent, blocked=blocked, tcp_state=state)
    elif name == "ping":
        raw.start()
        raw.send(frames.PingFrame(0, opaque_data=b"ats-ping").serialize())
        raw.read(args.hold, lambda: raw.ping_acks)
    else:
        emit(event="summary", error=f"unknown hostile case {name}")
        sys.exit(2)
    emit(event="summary", scenario=name, **raw.summary())


def main():
    parser = argparse.ArgumentParser(description="HTTP/2 test client (well-behaved and hostile)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--proxy", type=int, help="explicit proxy port on 127.0.0.1 (CONNECT)")
    where.add_argument("--direct", type=int, help="server port on 127.0.0.1")
    parser.add_argument("--connect", required=True, help="HOST:PORT of the tunnel and default :authority")
    parser.add_argument("--sni", help="TLS server name (default: the --connect host)")
    parser.add_argument("--cacert", help="CA file to verify the server with (default: no verification)")
    parser.add_argument("--alpn", default="h2")
    parser.add_argument("--timeout", type=float, default=20, help="the whole run ends after this many seconds")
    commands = parser.add_subparsers(dest="command", required=True)
    requests = commands.add_parser("requests")
    requests.add_argument("--spec", required=True, help="JSON list of request specs")
    requests.add_argument("--sequential", action="store_true", help="one stream at a time")
    requests.add_argument("--linger", type=float, default=0, help="keep reading this long after the last stream")
    requests.add_argument("--window", type=int, help="our SETTINGS_INITIAL_WINDOW_SIZE")
    bad = commands.add_parser("hostile")
    bad.add_argument("name")
    bad.add_argument("--hold", type=float, default=3, help="seconds to wait for the server's reaction")
    bad.add_argument("--release", help="zero-window: stop holding once this file exists")
    bad.add_argument("--count", type=int, default=1000, help="made-you-reset: how many streams")
    bad.add_argument("--frame", default="ping", choices=["ping", "settings"], help="ping-flood-no-read: what")
    args = parser.parse_args()
    started = time.monotonic()
    tls = open_connection(args)
    tls.settimeout(10)
    if args.command == "requests":
        summary = Client(tls, args, json.loads(args.spec)).run(started + args.timeout)
        emit(event="summary", alpn=tls.selected_alpn_protocol(), **summary)
    else:
        args.hold = min(args.hold, max(0.5, args.timeout - (time.monotonic() - started)))
        hostile(tls, args)
    try:
        tls.close()
    except OSError:
        pass


if __name__ == "__main__":
    main()
