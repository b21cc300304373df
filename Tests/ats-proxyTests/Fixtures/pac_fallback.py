#!/usr/bin/env python3
"""Loads two pages in one headless Chromium configured with a PAC URL (a test tool, never product code).

Chromium starts with --proxy-pac-url (and --host-resolver-rules mapping the test origin's name to 127.0.0.1
for direct connections), loads --first, prints "FIRST <text>", then waits until --wait-file exists (the test
stops the proxy and creates it), loads --second in the same browser (so with the PAC file it fetched at the
start), prints "SECOND <text>", and exits 0. "FAIL <reason>" and exit 1 otherwise. Uses cdp_page's Browser
(DevTools protocol over a pipe).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_page import Browser, fail  # noqa: E402


def load(browser, url, timeout):
    browser.send("Page.navigate", {"url": url})
    browser.wait_for("document.readyState === 'complete' && document.body !== null && "
                     "document.body.innerText.includes('hello from')", timeout, f"the page {url}")
    return browser.evaluate("document.body.innerText").strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--pac", required=True)
    parser.add_argument("--map", required=True, help="host name mapped to 127.0.0.1 for direct connections")
    parser.add_argument("--first", required=True)
    parser.add_argument("--second", required=True)
    parser.add_argument("--wait-file", required=True)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()

    extra = [f"--proxy-pac-url={args.pac}", "--proxy-bypass-list=<-loopback>",
             f"--host-resolver-rules=MAP {args.map} 127.0.0.1"]
    browser = Browser(args.chromium, args.profile, 800, 600, extra)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                session=False)
        browser.session = attached["sessionId"]
        browser.send("Page.enable")
        print("FIRST " + json.dumps(load(browser, args.first, args.timeout)), flush=True)
        deadline = time.time() + args.timeout
        while not os.path.exists(args.wait_file):
            if time.time() > deadline:
                fail("the wait file never appeared")
            time.sleep(0.1)
        print("SECOND " + json.dumps(load(browser, args.second, args.timeout)), flush=True)
    finally:
        browser.close()


if __name__ == "__main__":
    main()
