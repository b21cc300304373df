#!/usr/bin/env python3
"""WCAG contrast of every piece of text on a page, in headless Chromium (a test tool).

--url URL (a file:// report.html, or the live page) is loaded at 1200x900 in light and dark colour schemes; for
each element with its own text the script takes the computed text colour and the first non-transparent
background up its ancestors, and computes the WCAG 2.x contrast ratio. Prints one JSON line
{"checked": N, "failures": [{"scheme", "text", "ratio", "color", "background", "large"}, ...]} where a failure is
under 4.5 (3.0 for large text: at least 24 px, or 18.66 px and bold). Bounded by --timeout.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_page import Browser  # noqa: E402

CHECK = r"""JSON.stringify((() => {
  function rgba(text) {
    const m = text.match(/rgba?\(([^)]+)\)/); if (!m) return [0, 0, 0, 1];
    const p = m[1].split(',').map(s => parseFloat(s)); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  }
  function lum(c) {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  }
  function background(el) {
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor); if (c[3] > 0.5) return c;
    }
    return [255, 255, 255, 1];
  }
  const out = []; let checked = 0;
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || el.getClientRects().length === 0) continue;
    checked++;
    const fg = rgba(style.color), bg = background(el);
    const a = lum(fg), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
    const large = size >= 24 || (size >= 18.66 && bold);
    if (ratio < (large ? 3 : 4.5)) out.push({text: el.textContent.trim().slice(0, 60), ratio: Math.round(ratio * 100) / 100,
      color: style.color, background: 'rgb(' + bg.slice(0, 3).join(', ') + ')', large});
  }
  return {checked, failures: out};
})())"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--url", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    browser = Browser(args.chromium, args.profile, 1200, 900)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                session=False)
        browser.session = attached["sessionId"]
        browser.send("Page.enable")
        result = {"checked": 0, "failures": []}
        for scheme in ("light", "dark"):
            browser.send("Emulation.setEmulatedMedia",
                         {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            browser.send("Page.navigate", {"url": args.url})
            browser.wait_for("document.readyState === 'complete'", args.timeout, "the page")
            found = json.loads(browser.evaluate(CHECK))
            result["checked"] += found["checked"]
            result["failures"] += [dict(item, scheme=scheme) for item in found["failures"]]
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        browser.close()


if __name__ == "__main__":
    main()
