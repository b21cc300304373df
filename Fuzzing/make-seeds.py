#!/usr/bin/env python3
"""Writes the seed corpora under Fuzzing/Corpus/<target>/ from the test suite's cases.

Development tool, not part of the proxy: run it again after adding parser test cases (python3 Fuzzing/make-seeds.py).
HTTP/1.1 seeds are the `raw:` strings of Tests/ATSProxyCoreTests/HTTP1{Parser,Rejection}Tests.swift (a response-role
case gets the method prefix the http1-response target expects); HTTP/2, target, plist and proxy-session event
seeds are written here. Regression inputs (proxy-session `regression-*`) are findings copied in by hand.
"""
import hashlib
import os
import re
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzzing", "Corpus")
ESCAPES = {"r": "\r", "n": "\n", "t": "\t", "0": "\0", '"': '"', "\\": "\\", "'": "'"}


def swift_string(text, pos):
    """Decodes the Swift string literal starting at text[pos] == '"'; returns (value, end)."""
    out, i = [], pos + 1
    while text[i] != '"':
        if text[i] == "\\":
            nxt = text[i + 1]
            if nxt == "u":
                close = text.index("}", i)
                out.append(chr(int(text[i + 3:close], 16)))
                i = close + 1
                continue
            out.append(ESCAPES[nxt])
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out), i + 1


def expression(text, pos, constants):
    """Reads `"lit" + NAME + "lit"` from pos up to a top-level ',' or ')'; None if it holds anything else."""
    parts = []
    while True:
        while text[pos] in " \n+":
            pos += 1
        if text[pos] == '"':
            value, pos = swift_string(text, pos)
            parts.append(value)
        else:
            match = re.match(r"(?:Self\.)?(\w+)", text[pos:])
            if not match or match.group(1) not in constants:
                return None
            parts.append(constants[match.group(1)])
            pos += match.end()
        rest = text[pos:].lstrip(" \n")
        if not rest.startswith("+"):
            return "".join(parts)


def http1_cases():
    for name in ("HTTP1ParserTests.swift", "HTTP1RejectionTests.swift"):
        text = open(os.path.join(ROOT, "Tests", "ATSProxyCoreTests", name)).read()
        constants = {}
        for match in re.finditer(r"static let (\w+) = \"", text):
            constants[match.group(1)] = swift_string(text, match.end() - 1)[0]
        for match in re.finditer(r"raw: ", text):
            value = expression(text, match.end(), constants)
            if value is None:
                continue
            window = text[match.end():match.end() + 600]
            case_end = window.find("Case(")
            window = window if case_end < 0 else window[:case_end]
            role = "response" if "role: .response" in window else "request"
            methods = re.search(r"methods: \[([^\]]*)\]", window)
            yield role, value.encode("utf-8"), methods.group(1) if methods else ""


# Alt-Svc values for the http1-response target's HTTP/3 offer check (invariant 5).
ALT_SVC = [
    ("alt-svc-h3", b'h3=":443"; ma=86400'),
    ("alt-svc-drafts", b'h3-29=":443"; ma=3600, h2="alt.example.com:8443"; persist=1'),
    ("alt-svc-clear", b"clear"),
    ("alt-svc-escaped", b'w%3Dx="[2001:db8::1]:443";ma="60", h3="\\x:1"'),
]


def write(target, data, label=""):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(folder, (label + "-" if label else "") + digest), "wb") as handle:
        handle.write(data)


# The http1-response target reads its first byte as the methods of 4 outstanding requests (2 bits each:
# GET, HEAD, POST, CONNECT); 0 means four GETs.
METHOD_BITS = {"GET": 0, "HEAD": 1, "POST": 2, "CONNECT": 3}


def response_prefix(methods):
    names = re.findall(r'"(\w+)"', methods) or ["GET"]
    value = 0
    for index, method in enumerate(names[:4]):
        value |= METHOD_BITS.get(method, 0) << (2 * index)
    return bytes([value])


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    """HPACK literal header field without indexing, new name, no Huffman (lengths below 127)."""
    name, value = name.encode(), value.encode()
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request(stream, method="GET", path="/", authority="api.example.com", extra=(), end_stream=True):
    block = b"".join(literal(*field) for field in [(":method", method), (":scheme", "https"),
                                                     (":authority", authority), (":path", path), *extra])
    return frame(1, 0x4 | (0x1 if end_stream else 0), stream, block)


def http2_seeds():
    settings = frame(4, 0, 0)
    connect = b"".join(literal(*f) for f in [(":method", "CONNECT"), (":authority", "other.test:443")])
    trailers = frame(1, 0x5, 1, literal("x-checksum", "abc"))
    yield "get", b"\x00" + settings + request(1)
    yield "post-length", b"\x01" + settings + request(1, "POST", "/up", extra=[("content-length", "5")],
                                                     end_stream=False) + frame(0, 0x1, 1, b"hello")
    yield "post-chunked-trailers", b"\x02" + settings + request(1, "POST", extra=[("te", "trailers")],
                                                               end_stream=False) + frame(0, 0, 1, b"abc") + trailers
    yield "two-streams-421", b"\x03" + settings + request(1) + request(3, authority="other.test")
    yield "connect-405", b"\x04" + settings + frame(1, 0x5, 1, connect)
    yield "host-contradicts", b"\x05" + settings + request(1, extra=[("host", "b.test")])
    yield "control-frames", b"\x06" + settings + frame(6, 0, 0, b"12345678") + frame(8, 0, 0, b"\x00\x01\x00\x00") + \
        request(1) + frame(3, 0, 1, b"\x00\x00\x00\x08") + frame(2, 0, 3, b"\x00\x00\x00\x00\x10")
    yield "reuse-lanes", b"\x00" + settings + request(1, path="/a") + request(3, path="/b") + request(5, path="/c")
    yield "reset-odd", b"\x10" + settings + request(1) + request(3)
    yield "backed-up-drain", b"\x60" + settings + request(1, "PUT", end_stream=False) + frame(0, 0, 1, b"x" * 100) + \
        frame(0, 0x1, 1, b"y") + request(3)
    custom = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    yield "custom-response", bytes([0x80, len(custom)]) + custom + settings + request(1)
    yield "goaway", b"\x00" + settings + request(1) + frame(7, 0, 0, b"\x00\x00\x00\x01\x00\x00\x00\x00")


TARGETS = [
    "example.com", "Example.COM:8080", "[::1]:8443", "[::ffff:127.0.0.1]:443", "127.0.0.1:80", "http://a.test/x?y",
    "https://user@a.test:444/p", "http://[2001:db8::1]:8080/", "ws://b.test", "wss://c.test:9443/s", "*", "/path?q",
    "ftp://x.test/", "http://a:/", "http://a%2eb/", "0177.0.0.1:443", "10.0.0.0/8", "2001:db8::/32", "::",
    "1.2.3.4", "http://1.2.3.4:65535/", "https://[fe80::1%25en0]/",
]


def plist_seeds():
    config = os.path.join(ROOT, "Config")
    for name in sorted(os.listdir(config)):
        if name.endswith(".plist"):
            yield name, open(os.path.join(config, name), "rb").read()
    yield "tiny", (b'<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict><key>NSAppTransportSecurity'
                   b'</key><dict><key>NSAllowsArbitraryLoads</key><integer>1</integer></dict></dict></plist>\n')


def client_hellos():
    """ClientHellos as Python's OpenSSL writes them: with and without SNI, with ALPN lists, TLS 1.2 and 1.3 only."""
    import ssl
    cases = [("sni-alpn", "api.example.com", ["h2", "http/1.1"], None), ("no-sni", None, ["http/1.1"], None),
             ("tls12", "a.test", ["h2"], ssl.TLSVersion.TLSv1_2), ("no-alpn", "b.test", None, None),
             ("odd-alpn", "c.test", ["spdy/3", "x", "h2c"], None)]
    for label, name, alpn, maximum in cases:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if maximum:
            context.maximum_version = maximum
        if alpn:
            context.set_alpn_protocols(alpn)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        engine = context.wrap_bio(incoming, outgoing, server_hostname=name)
        try:
            engine.do_handshake()
        except ssl.SSLWantReadError:
            pass
        yield label, outgoing.read()


# Event kinds of the proxy-session target (`ProxySessionFuzz.Kind`, in order).
(CLIENT_BYTES, CANNED_REQUEST, CONNECTED, REUSED, CONNECT_FAILED, UPSTREAM_BYTES, CANNED_RESPONSE, UPSTREAM_EOF,
 UPSTREAM_RESET, REQUIRES_HTTP11, PARTS, TIMER, DRAIN, CLIENT_EOF, CLIENT_GONE, PEER) = range(16)


def session_seeds():
    """Realistic event sequences for the proxy-session target: a configuration byte, then events."""
    def ev(kind, *operands):
        return bytes([kind, *operands])

    def payload(kind, data):
        data = data.encode() if isinstance(data, str) else data
        assert len(data) < 256
        return bytes([kind, len(data)]) + data

    get, head, chunked_post, expect, body4, upgrade, blocked, onboarding, itself, allowed, http10, connect, \
        half_post, pipelined, self_absolute, ntlm, tunnel_http, tunnel_blocked, tunnel_misdirected, tunnel_h2c, \
        tunnel_tls, tunnel_ssh = range(22)
    ok, chunked, cont, switching, no_content, not_modified, until_close, early_hints, short, unauthorized, \
        old, garbage = range(12)
    seeds = {
        "get-200": [ev(CANNED_REQUEST, get), ev(PEER, 7), ev(CONNECTED), ev(CANNED_RESPONSE, ok), ev(TIMER),
                    ev(TIMER), ev(TIMER)],
        "chunked-post-trailers": [ev(CANNED_REQUEST, chunked_post), ev(CONNECTED), ev(CANNED_RESPONSE, chunked)],
        "expect-100-continue": [ev(CANNED_REQUEST, expect), ev(CONNECTED), ev(CANNED_RESPONSE, cont),
                                ev(CANNED_REQUEST, body4), ev(CANNED_RESPONSE, early_hints),
                                ev(CANNED_RESPONSE, ok)],
        "upgrade-101": [ev(CANNED_REQUEST, upgrade), ev(CONNECTED), ev(CANNED_RESPONSE, switching),
                        payload(CLIENT_BYTES, "hello"), payload(UPSTREAM_BYTES, "world"), ev(UPSTREAM_EOF)],
        "blocked-then-onboarding": [ev(CANNED_REQUEST, blocked), ev(CANNED_REQUEST, onboarding),
                                    ev(CANNED_REQUEST, itself), ev(CANNED_REQUEST, self_absolute)],
        "reset-mid-body": [ev(CANNED_REQUEST, get), ev(CONNECTED), ev(CANNED_RESPONSE, short), ev(UPSTREAM_RESET)],
        "retry-on-reused": [ev(CANNED_REQUEST, get), ev(REUSED, 0), ev(UPSTREAM_RESET), ev(CONNECTED),
                            ev(CANNED_RESPONSE, ok), ev(CANNED_REQUEST, get), ev(REUSED, 0), ev(CANNED_RESPONSE, ok)],
        "head-with-length": [ev(CANNED_REQUEST, head), ev(CONNECTED),
                             payload(UPSTREAM_BYTES, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")],
        "pipelined-keep-alive": [ev(CANNED_REQUEST, pipelined), ev(CONNECTED), ev(CANNED_RESPONSE, ok),
                                 ev(CANNED_RESPONSE, not_modified), ev(CLIENT_EOF)],
        "until-close": [ev(CANNED_REQUEST, http10), ev(CONNECTED), ev(CANNED_RESPONSE, until_close),
                        ev(UPSTREAM_EOF), ev(UPSTREAM_EOF)],
        "connect-failed": [ev(CANNED_REQUEST, allowed), ev(CONNECT_FAILED, 2)],
        "exchange-timeout": [ev(CANNED_REQUEST, half_post), ev(CONNECTED), ev(TIMER), ev(TIMER)],
        "drain-mid-exchange": [ev(CANNED_REQUEST, get), ev(CONNECTED), ev(DRAIN), ev(CANNED_RESPONSE, no_content)],
        "ntlm-401": [ev(CANNED_REQUEST, ntlm), ev(CONNECTED), ev(CANNED_RESPONSE, unauthorized),
                     ev(CANNED_REQUEST, get), ev(CANNED_RESPONSE, ok)],
        "connect-tunnel": [ev(CANNED_REQUEST, connect), payload(CLIENT_BYTES, b"\x16\x03\x01\x00\x05hello")],
        "garbage-response": [ev(CANNED_REQUEST, get), ev(CONNECTED), ev(CANNED_RESPONSE, garbage)],
        "partial-head-timeout": [payload(CLIENT_BYTES, "GET http://localhost/ HTTP/1.1\r\nHo"), ev(TIMER)],
        "client-gone": [ev(CANNED_REQUEST, get), ev(CONNECTED), ev(CLIENT_GONE)],
        "tunnel-http": [ev(CANNED_REQUEST, tunnel_http), ev(CONNECTED), ev(CANNED_RESPONSE, ok),
                        ev(CANNED_REQUEST, tunnel_blocked)],
        "tunnel-blocked": [ev(CANNED_REQUEST, tunnel_blocked), ev(CLIENT_EOF)],
        "tunnel-misdirected": [ev(CANNED_REQUEST, tunnel_misdirected)],
        "tunnel-h2c": [ev(CANNED_REQUEST, tunnel_h2c), payload(CLIENT_BYTES, bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))],
        "tunnel-tls-split": [ev(CANNED_REQUEST, tunnel_tls), payload(CLIENT_BYTES, b"\x05\x01"), ev(TIMER)],
        "tunnel-silent": [payload(CLIENT_BYTES, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n"), ev(TIMER)],
        "tunnel-unknown": [ev(CANNED_REQUEST, tunnel_ssh)],
        # SOCKS5 on the same port: greeting, CONNECT to a domain, then HTTP inside (allowed, then blocked).
        "socks5-http": [payload(CLIENT_BYTES, b"\x05\x01\x00"),
                        payload(CLIENT_BYTES, b"\x05\x01\x00\x03\x0callowed.test\x00\x50"),
                        payload(CLIENT_BYTES, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), ev(CONNECTED),
                        ev(CANNED_RESPONSE, ok), payload(CLIENT_BYTES, "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n")],
        "socks5-all-at-once": [payload(CLIENT_BYTES, b"\x05\x02\x02\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x1f\x90"
                                       b"\x16\x03\x01\x00\x05hello")],
        "socks5-ipv6-silent": [payload(CLIENT_BYTES, b"\x05\x01\x00\x05\x01\x00\x04" + bytes(15) + b"\x01\x01\xbb"),
                               ev(TIMER)],
        "socks5-bind": [payload(CLIENT_BYTES, b"\x05\x01\x00\x05\x02\x00\x03\x01a\x00\x50")],
        "socks5-stalled": [payload(CLIENT_BYTES, b"\x05\x03\x00"), ev(TIMER), ev(CLIENT_EOF)],
        "socks4a": [payload(CLIENT_BYTES, b"\x04\x01\x00\x50\x00\x00\x00\x01u\x00allowed.test\x00")],
    }
    for label, events in seeds.items():
        yield "cfg0-" + label, bytes([0]) + b"".join(events)
    yield "cfg1-report-blocked", bytes([1]) + ev(CANNED_REQUEST, blocked) + ev(CONNECTED) + ev(CANNED_RESPONSE, ok)
    channel = [ev(CANNED_REQUEST, blocked), ev(REUSED, 1), payload(PARTS, bytes([0x01, 0x20, 0x00, 0x00, 0x03]))]
    yield "cfg2-upgrade-channel", bytes([2]) + b"".join(channel)
    yield "cfg2-upgrade-channel-chunked", bytes([2]) + b"".join([
        ev(CANNED_REQUEST, blocked), ev(REUSED, 1), payload(PARTS, bytes([0x08, 0x05, 0x02])),
        payload(PARTS, bytes([0x03])), ev(CANNED_REQUEST, blocked), ev(REUSED, 1), ev(REQUIRES_HTTP11),
        ev(CONNECTED)])
    yield "cfg3-ignored-host", bytes([3]) + ev(CANNED_REQUEST, blocked) + ev(CONNECTED) + ev(CANNED_RESPONSE, ok)
    yield "cfg4-allow-hosts", bytes([4]) + ev(CANNED_REQUEST, blocked) + ev(CANNED_REQUEST, get) + ev(CONNECTED)
    yield "cfg5-tunnel-relay", bytes([5]) + ev(CANNED_REQUEST, tunnel_ssh) + ev(CONNECTED) + \
        payload(UPSTREAM_BYTES, "SSH-2.0-y\r\n") + ev(UPSTREAM_EOF)
    yield "cfg5-socks5-passthrough", bytes([5]) + payload(
        CLIENT_BYTES, b"\x05\x01\x00\x05\x01\x00\x03\x0dapi.pass.test\x01\xbb") + ev(CONNECT_FAILED, 2)
    yield "cfg5-no-linger", bytes([5]) + ev(CANNED_REQUEST, chunked_post) + ev(CONNECTED) + \
        ev(CANNED_RESPONSE, chunked) + ev(TIMER) + ev(CANNED_REQUEST, get) + ev(REUSED, 0)


def main():
    for label, data in client_hellos():
        write("tls-hello", data, label)
    for role, raw, methods in http1_cases():
        if role == "request":
            write("http1-request", raw)
        else:
            write("http1-response", response_prefix(methods) + raw)
    for label, value in ALT_SVC:
        write("http1-response", bytes([0]) + b"HTTP/1.1 200 OK\r\nAlt-Svc: " + value + b"\r\nContent-Length: 0\r\n\r\n",
              label)
    for label, data in http2_seeds():
        write("http2-frontend", data, label)
    for text in TARGETS:
        write("request-target", text.encode())
    for label, data in plist_seeds():
        write("info-plist", data, label.replace(".", "-"))
    for label, data in session_seeds():
        write("proxy-session", data, label)


main()
