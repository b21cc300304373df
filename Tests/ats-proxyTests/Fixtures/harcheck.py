#!/usr/bin/env python3
"""Checks a HAR file for the ats-proxy tests (a test tool, never product code).

Validates it against har-1.2.schema.json (next to this file) with jsonschema, then reads it back
with haralyzer, a HAR consumer from PyPI, and prints one JSON line per entry as haralyzer sees it:
url, method, status, httpVersion and the _ats* custom fields. Exits 1 with the reason otherwise.
"""

import json
import os
import sys

import jsonschema

try:
    from haralyzer import HarParser
except ImportError:
    print("FAIL haralyzer is not installed (scripts/bootstrap test installs it)", flush=True)
    sys.exit(1)


def main():
    path = sys.argv[1]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "har-1.2.schema.json")) as handle:
        schema = json.load(handle)
    with open(path) as handle:
        document = json.load(handle)
    try:
        jsonschema.validate(document, schema, format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as error:
        print(f"FAIL schema: {error.message} at {list(error.absolute_path)}", flush=True)
        sys.exit(1)
    parser = HarParser(document)
    for page in parser.pages:
        for entry in page.entries:
            print(json.dumps({
                "url": entry.url,
                "method": entry.request.method,
                "status": entry.status,
                "httpVersion": entry.request.httpVersion,
                "startTime": entry.startTime.isoformat(),
                "time": entry.raw_entry["time"],
                "timings": entry.raw_entry["timings"],
                "postData": entry.raw_entry["request"].get("postData"),
                "content": entry.raw_entry["response"]["content"],
                "outcome": entry.raw_entry.get("_atsOutcome"),
                "code": entry.raw_entry.get("_atsCode"),
                "rule": entry.raw_entry.get("_atsRule"),
                "fix": entry.raw_entry.get("_atsFix"),
                "route": entry.raw_entry.get("_atsRoute"),
                "tls": entry.raw_entry.get("_tls"),
                "requestHeaders": {h["name"].lower(): h["value"] for h in entry.request.headers},
            }), flush=True)
    print("HAR OK", flush=True)


main()
