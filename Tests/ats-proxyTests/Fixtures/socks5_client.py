#!/usr/bin/env python3
"""A SOCKS5 client written on a plain socket, for the SOCKS end-to-end tests (a test tool).

--mode get: the RFC 1928 handshake to --proxy (host:port) for --host/--port (sent as a domain name, ATYP 3),
then one HTTP/1.1 GET of --path inside the tunnel; prints "METHOD <byte>", "REPLY <byte>", then the response's
status line and body ("STATUS <line>", "BODY <text>").
Hostile modes print what the proxy answered ("REPLY <hex>" or "CLOSED") and exit 0:
  bind       a BIND request (command 2): expects REP 7
  udp        a UDP ASSOCIATE request (command 3): expects REP 7
  atyp       an unknown address type: expects REP 8
  auth-only  a greeting offering username/password only: expects method 0xFF
  truncated  half a greeting, then the socket is closed
  garbage    a greeting, a valid request, then bytes that are neither TLS nor HTTP
  socks4     a SOCKS4a CONNECT: expects VN 0, CD 0x5B
Bounded by --timeout (seconds) on every socket operation.
"""
import argparse
import socket
import sys


def recv_exact(conn, count):
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def request(host, port, command=1):
    name = host.encode("ascii")
    return bytes([5, command, 0, 3, len(name)]) + name + port.to_bytes(2, "big")


def read_all(conn):
    data = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--host", default="example.test")
    parser.add_argument("--port", type=int, default=80)
    parser.add_argument("--path", default="/")
    parser.add_argument("--mode", default="get")
    parser.add_argument("--timeout", type=float, default=10)
    args = parser.parse_args()
    proxy_host, _, proxy_port = args.proxy.rpartition(":")
    conn = socket.create_connection((proxy_host, int(proxy_port)), timeout=args.timeout)
    mode = args.mode

    if mode == "socks4":
        conn.sendall(bytes([4, 1]) + args.port.to_bytes(2, "big") + bytes([0, 0, 0, 1]) + b"u\x00"
                     + args.host.encode("ascii") + b"\x00")
        print("REPLY " + read_all(conn).hex())
        return 0
    if mode == "truncated":
        conn.sendall(bytes([5, 2]))
        conn.close()
        print("CLOSED")
        return 0
    if mode == "auth-only":
        conn.sendall(bytes([5, 1, 2]))
        print("REPLY " + read_all(conn).hex())
        return 0

    conn.sendall(bytes([5, 1, 0]))
    method = recv_exact(conn, 2)
    print("METHOD %s" % method.hex())
    if method != bytes([5, 0]):
        return 1
    if mode in ("bind", "udp"):
        conn.sendall(request(args.host, args.port, 2 if mode == "bind" else 3))
        print("REPLY " + read_all(conn).hex())
        return 0
    if mode == "atyp":
        conn.sendall(bytes([5, 1, 0, 9, 1, 2, 3, 4, 0, 80]))
        print("REPLY " + read_all(conn).hex())
        return 0

    conn.sendall(request(args.host, args.port))
    reply = recv_exact(conn, 10)
    print("REPLY " + reply.hex())
    if len(reply) < 2 or reply[1] != 0:
        return 0
    if mode == "garbage":
        conn.sendall(b"\x00\x01\x02 not a protocol \xff\xfe")
        rest = read_all(conn)
        print("AFTER %d" % len(rest))
        return 0

    authority = args.host if args.port == 80 else "%s:%d" % (args.host, args.port)
    conn.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nUser-Agent: socks5-client\r\n\r\n"
                  % (args.path, authority)).encode("ascii"))
    response = read_all(conn)
    head, _, body = response.partition(b"\r\n\r\n")
    print("STATUS " + head.split(b"\r\n")[0].decode("latin-1"))
    print("BODY " + body.decode("latin-1"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
