#!/usr/bin/env python3
"""A small CONNECT-only HTTP proxy for the upstream-proxy chaining tests (a test tool).

Binds --bind (127.0.0.1, or ::1) on --port (0: any free port) and prints "READY <port>". Each
CONNECT host:port is logged as "CONNECT host:port auth=none|ok|wrong" and tunnelled to
--target-address:port (the test's origins all listen on 127.0.0.1; the host name is only logged, as
a proxy that resolves it would receive it). With --user/--password, a missing or wrong
Proxy-Authorization gets 407. A target that refuses gets 502. Anything but CONNECT gets 405.
Bounded: at most --max-connections at once, heads up to 64 KiB, and the process exits after
--lifetime seconds.
"""
import argparse
import base64
import socket
import sys
import threading
import time

HEAD_LIMIT = 65536


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
        if len(data) > HEAD_LIMIT:
            return None
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def pump(source, sink):
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def answer(conn, status, extra=""):
    conn.sendall(f"HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n".encode())


class Proxy:
    def __init__(self, args):
        self.args = args
        self.log_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(args.max_connections)

    def log(self, line):
        with self.log_lock:
            with open(self.args.log, "a") as handle:
                handle.write(line + "\n")

    def auth_state(self, lines):
        supplied = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "proxy-authorization":
                supplied = value.strip()
        if supplied is None:
            return "none"
        expected = "Basic " + base64.b64encode(f"{self.args.user}:{self.args.password}".encode()).decode()
        return "ok" if self.args.user is not None and supplied == expected else "wrong"

    def handle(self, conn):
        upstream = None
        try:
            conn.settimeout(30)
            parsed = read_head(conn)
            if parsed is None:
                return
            head, rest = parsed
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or parts[0] != "CONNECT":
                self.log(f"REFUSED {lines[0]}")
                answer(conn, "405 Method Not Allowed")
                return
            target = parts[1]
            auth = self.auth_state(lines)
            hosts = [line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("host:")]
            self.log(f"CONNECT {target} auth={auth} host={hosts[0] if hosts else '-'}")
            if self.args.user is not None and auth != "ok":
                answer(conn, "407 Proxy Authentication Required", 'Proxy-Authenticate: Basic realm="fixture"\r\n')
                return
            _, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection((self.args.target_address, int(port)), timeout=10)
            except (OSError, ValueError):
                answer(conn, "502 Bad Gateway")
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            conn.settimeout(None)
            upstream.settimeout(None)
            back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
            back.start()
            pump(conn, upstream)
            back.join(timeout=60)
        except OSError:
            pass
        finally:
            if upstream is not None:
                upstream.close()
            conn.close()
            self.slots.release()

    def serve(self):
        family = socket.AF_INET6 if ":" in self.args.bind else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.args.bind, self.args.port))
        listener.listen(64)
        print(f"READY {listener.getsockname()[1]}", flush=True)
        deadline = time.monotonic() + self.args.lifetime
        listener.settimeout(1)
        while time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            if not self.slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bind", default="127.0.0.1", help="the loopback address to listen on (127.0.0.1 or ::1)")
    parser.add_argument("--target-address", default="127.0.0.1")
    parser.add_argument("--user")
    parser.add_argument("--password", default="")
    parser.add_argument("--max-connections", type=int, default=64)
    parser.add_argument("--lifetime", type=float, default=300, help="exit after this many seconds")
    Proxy(parser.parse_args()).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
