#!/usr/bin/env python3
"""Parses a Prometheus text exposition for the ats-proxy tests (a test tool, never product code).

Reads the file named on the command line with prometheus_client's own parser
(prometheus_client.parser.text_string_to_metric_families) and prints one JSON line per sample:
family, type, sample name, labels and value, then "METRICS OK". Exits 1 when the text does not parse.
"""

import json
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("FAIL prometheus_client is not installed (scripts/bootstrap test installs it)", flush=True)
    sys.exit(1)


def main():
    with open(sys.argv[1]) as handle:
        text = handle.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as error:  # the parser raises ValueError and others for malformed text
        print("FAIL %s" % error, flush=True)
        sys.exit(1)
    for family in families:
        for sample in family.samples:
            print(json.dumps({
                "family": family.name, "type": family.type, "name": sample.name,
                "labels": sample.labels, "value": sample.value,
            }), flush=True)
    print("METRICS OK %d families" % len(families), flush=True)


if __name__ == "__main__":
    main()
