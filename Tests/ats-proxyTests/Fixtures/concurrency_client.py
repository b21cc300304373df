#!/usr/bin/env python3
"""Opens N connections to the proxy at once with asyncio (a test tool, never product code), holds
all of them open, then sends one proxied GET on each and checks every answer. Prints
"OPEN <n>", then "OK <count>" or "FAIL <count> <first reasons>". Bounded by --deadline seconds.
"""

import argparse
import asyncio
import sys


async def one(host, port, request, expect, opened, release):
    reader, writer = await asyncio.open_connection(host, port)
    opened.append(1)
    await release.wait()
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        if not status.startswith(b"HTTP/1.1 200") or body != expect:
            return f"{status!r} {body[:60]!r}"
        return None
    finally:
        writer.close()


async def run(args):
    request = f"GET {args.url} HTTP/1.1\r\nHost: {args.url.split('/')[2]}\r\n\r\n".encode()
    expect = args.expect.encode().decode("unicode_escape").encode()
    opened = []
    release = asyncio.Event()
    tasks = [
        asyncio.create_task(one(args.host, args.port, request, expect, opened, release)) for _ in range(args.count)
    ]
    while len(opened) < args.count and not any(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    print(f"OPEN {len(opened)}", flush=True)
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [repr(r) for r in results if r is not None]
    if failures:
        print(f"FAIL {len(failures)} {failures[:3]}", flush=True)
        return 1
    print(f"OK {len(results)}", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--expect", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--deadline", type=float, default=20)
    args = parser.parse_args()
    try:
        code = asyncio.run(asyncio.wait_for(run(args), args.deadline))
    except asyncio.TimeoutError:
        print("FAIL deadline", flush=True)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
