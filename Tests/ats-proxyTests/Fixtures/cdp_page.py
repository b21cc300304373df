#!/usr/bin/env python3
"""Drives the live flow page in headless Chromium over the DevTools protocol (a test tool, never
product code).

Chromium runs with --remote-debugging-pipe (commands on fd 3, replies and events on fd 4, each
message a NUL-terminated JSON object), so no WebSocket client is needed. The script opens the page,
prints "CONNECTED" once its event stream is open (the test then sends traffic through the proxy),
waits for --expect rows, reads every row, applies the host filter and "violations only" and reads
which rows stay visible, clicks the first row with --select-outcome, reads the detail pane, saves a
screenshot, and prints "RESULT <json>". Exits 1 with "FAIL <reason>" otherwise.
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import time


def fail(message):
    print(f"FAIL {message}", flush=True)
    sys.exit(1)


class Browser:
    def __init__(self, chromium, profile, width, height, extra=()):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def wire():
            # Move both ends out of the way first (either may already be 3 or 4), then place them;
            # pipes are close-on-exec, so mark the placed copies inheritable.
            reading, writing = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(reading, 3)
            os.dup2(writing, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--hide-scrollbars", f"--user-data-dir={profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", *extra, "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def send(self, method, params=None, session=True, timeout=20):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        fail(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                fail(f"chromium closed the pipe during {method}")
            self.buffer += chunk
        fail(f"no reply to {method}")

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            fail(f"script error in {expression[:80]}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        fail(f"timed out waiting for {what}")

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except SystemExit:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


ROWS = """JSON.stringify([...document.querySelectorAll('#rows tr')].map(r => ({
  id: Number(r.dataset.id), outcome: r.dataset.outcome, code: r.dataset.code, host: r.dataset.host,
  cells: [...r.children].map(c => c.textContent), hidden: r.hidden,
  colour: getComputedStyle(r.children[0]).borderLeftColor})))"""


# Layout facts (at half a screen, and at full width beside the detail pane): where the first row's outcome and
# code cells end against the viewport and the list, whether the detail pane is below the list, and whether
# anything scrolls sideways.
HALF = """JSON.stringify((() => {
  const r = [...document.querySelectorAll('#rows tr')].find(r => !r.hidden);
  const cells = r ? [...r.children] : [];
  const badge = cells.find(c => c.classList.contains('badge'));
  const code = badge ? badge.nextElementSibling : null;
  const list = document.querySelector('.list').getBoundingClientRect();
  const aside = document.querySelector('aside').getBoundingClientRect();
  return {width: innerWidth, scrollWidth: document.documentElement.scrollWidth,
    outcomeRight: badge ? badge.getBoundingClientRect().right : 99999,
    codeRight: code ? code.getBoundingClientRect().right : 99999,
    listRight: list.right,
    shownColumns: [...document.querySelectorAll('thead th')].filter(t => getComputedStyle(t).display !== 'none')
      .map(t => t.textContent),
    detailBelowList: aside.top >= list.bottom - 1};
})())"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--url", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--filter-host", required=True)
    parser.add_argument("--select-outcome", default="blocked")
    parser.add_argument("--expect-dictionary", default="NSAppTransportSecurity")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--phone-screenshot", help="also a 390x844 (phone) screenshot, after the main one")
    parser.add_argument("--half-screenshot",
                        help="also the page at 900x900 (beside the Simulator): layout facts, filters in the URL "
                             "(restored on reload), a hidden column, copy as curl, and this screenshot")
    args = parser.parse_args()

    browser = Browser(args.chromium, args.profile, 1400, 900)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                session=False)
        browser.session = attached["sessionId"]
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        browser.send("Page.enable")
        browser.send("Page.navigate", {"url": args.url})
        browser.wait_for("!!(window.atsProxy && window.atsProxy.connected)", args.timeout, "the event stream")
        print("CONNECTED", flush=True)
        browser.wait_for(f"document.querySelectorAll('#rows tr').length >= {args.expect}", args.timeout,
                         f"{args.expect} rows")
        result = {"rows": json.loads(browser.evaluate(ROWS))}
        host = json.dumps(args.filter_host)
        browser.evaluate(f"(() => {{ const f = document.getElementById('f-host'); f.value = {host};"
                         " f.dispatchEvent(new Event('input')); return true; })()")
        result["hostFiltered"] = json.loads(browser.evaluate(ROWS))
        browser.evaluate("(() => { const f = document.getElementById('f-host'); f.value = '';"
                         " f.dispatchEvent(new Event('input'));"
                         " document.getElementById('f-violations').click(); return true; })()")
        result["violationsOnly"] = json.loads(browser.evaluate(ROWS))
        browser.evaluate("document.getElementById('f-violations').click()")
        # An allowed HTTPS flow first: its TLS facts and timings.
        result["allowedDetail"] = json.loads(browser.evaluate(
            "(() => { const r = document.querySelector('#rows tr[data-outcome=\"allowed\"]'); if (!r) return 'null';"
            " r.click(); return JSON.stringify({tls: document.getElementById('d-tls')?.innerText,"
            " timings: document.getElementById('d-timings')?.innerText}); })()"))
        wanted = json.dumps(args.select_outcome)
        clicked = browser.evaluate(f"(() => {{ const r = document.querySelector('#rows tr[data-outcome=' + "
                                   f"JSON.stringify({wanted}) + ']'); if (!r) return false; r.click(); return true; }})()")
        if not clicked:
            fail(f"no {args.select_outcome} row to click")
        result["detail"] = json.loads(browser.evaluate(
            "JSON.stringify({rule: document.getElementById('d-rule')?.textContent,"
            " fix: document.getElementById('d-fix')?.textContent,"
            " chain: document.getElementById('d-chain')?.textContent,"
            " console: document.getElementById('d-console')?.textContent,"
            " selected: document.querySelector('#rows tr.sel')?.dataset.id,"
            " text: document.getElementById('detail').innerText})"))
        expected = json.dumps(args.expect_dictionary)
        browser.wait_for(f"document.getElementById('dictionary').textContent.includes({expected})",
                         args.timeout, f"the minimal dictionary to mention {args.expect_dictionary}")
        result["dictionary"] = browser.evaluate("document.getElementById('dictionary').textContent")
        browser.evaluate("document.getElementById('verify').click()")
        browser.wait_for("document.getElementById('verified').textContent.includes('still fail')", args.timeout,
                         "the verify action")
        result["verified"] = browser.evaluate("document.getElementById('verified').textContent")
        # Beside the detail pane at full width, the URL gives way: outcome and code stay inside the list.
        result["wide"] = json.loads(browser.evaluate(HALF))
        shot = browser.send("Page.captureScreenshot", {"format": "png"})
        with open(args.screenshot, "wb") as handle:
            handle.write(base64.b64decode(shot["data"]))
        if args.half_screenshot:
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 900, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            result["half"] = json.loads(browser.evaluate(HALF))
            shot = browser.send("Page.captureScreenshot", {"format": "png"})
            with open(args.half_screenshot, "wb") as handle:
                handle.write(base64.b64decode(shot["data"]))
            browser.evaluate("(() => { const s = document.getElementById('f-outcome'); s.value = 'blocked';"
                             " s.dispatchEvent(new Event('change')); return true; })()")
            browser.evaluate("(() => { document.querySelector('.cols input[data-col=\"status\"]').click();"
                             " return true; })()")
            result["search"] = browser.evaluate("location.search")
            href = browser.evaluate("location.href")
            browser.send("Page.navigate", {"url": href})
            browser.wait_for("!!(window.atsProxy && window.atsProxy.connected)", args.timeout, "the reloaded page")
            browser.wait_for(f"document.querySelectorAll('#rows tr').length >= {args.expect}", args.timeout,
                             "the reloaded rows")
            result["restored"] = json.loads(browser.evaluate(
                "JSON.stringify({outcome: document.getElementById('f-outcome').value,"
                " statusShown: getComputedStyle(document.querySelector('th.c-status')).display !== 'none',"
                " shown: [...document.querySelectorAll('#rows tr')].filter(r => !r.hidden).map(r => r.dataset.outcome)})"))
            result["curl"] = browser.evaluate(
                "(() => { const r = [...document.querySelectorAll('#rows tr')].find(r => !r.hidden); if (!r) return '';"
                " r.click(); return document.getElementById('d-curl')?.textContent || ''; })()")
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        if args.phone_screenshot:
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
            result["phoneScrollWidth"] = browser.evaluate("document.documentElement.scrollWidth")
            shot = browser.send("Page.captureScreenshot", {"format": "png"})
            with open(args.phone_screenshot, "wb") as handle:
                handle.write(base64.b64decode(shot["data"]))
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        browser.close()


if __name__ == "__main__":
    main()
