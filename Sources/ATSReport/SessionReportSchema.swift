/// The JSON Schema (draft 2020-12) of `report.json`, kept as a string because the package
/// manifest cannot exclude a resource file here. Tests validate written reports against it with
/// Python's `jsonschema`; `additionalProperties: false` everywhere makes a drift between the
/// Codable types and the schema fail those tests.
public enum SessionReportSchema {
    /// The schema text.
    public static let json = #"""
        {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "$id": "https://ats-proxy.invalid/schema/report-v1.json",
          "title": "ats-proxy session report",
          "type": "object",
          "additionalProperties": false,
          "required": ["schemaVersion", "generator", "generatedAt", "source", "platform", "options", "configuration",
                       "totals", "hosts", "minimalDictionary", "comparison"],
          "properties": {
            "schemaVersion": { "const": 1 },
            "generator": { "const": "ats-proxy" },
            "generatedAt": { "type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z$" },
            "source": { "type": "string" },
            "platform": { "type": "string", "minLength": 1 },
            "options": {
              "type": "object", "additionalProperties": false,
              "required": ["subdomainDepth", "builtInAppleExceptions", "explicitLocalNetworkingNoIsStrict",
                           "tls12FloorOn26", "localNetworks", "trustOverrideHosts"],
              "properties": {
                "subdomainDepth": { "enum": ["any", "one"] },
                "builtInAppleExceptions": { "type": "boolean" },
                "explicitLocalNetworkingNoIsStrict": { "type": "boolean" },
                "tls12FloorOn26": { "type": "boolean" },
                "localNetworks": { "type": "array", "items": { "type": "string" } },
                "trustOverrideHosts": { "type": "array", "items": { "type": "string" } }
              }
            },
            "configuration": {
              "type": "object", "additionalProperties": false,
              "required": ["allowsArbitraryLoads", "allowsArbitraryLoadsForMedia", "allowsArbitraryLoadsInWebContent",
                           "allowsLocalNetworking", "exceptionDomains", "pinnedDomains"],
              "properties": {
                "allowsArbitraryLoads": { "$ref": "#/$defs/boolSetting" },
                "allowsArbitraryLoadsForMedia": { "$ref": "#/$defs/boolSetting" },
                "allowsArbitraryLoadsInWebContent": { "$ref": "#/$defs/boolSetting" },
                "allowsLocalNetworking": { "$ref": "#/$defs/boolSetting" },
                "exceptionDomains": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["key", "includesSubdomains", "allowsInsecureHTTPLoads", "requiresForwardSecrecy"],
                    "properties": {
                      "key": { "type": "string" },
                      "includesSubdomains": { "type": "boolean" },
                      "allowsInsecureHTTPLoads": { "type": "boolean" },
                      "minimumTLSVersion": { "$ref": "#/$defs/tlsVersion" },
                      "requiresForwardSecrecy": { "type": "boolean" }
                    }
                  }
                },
                "pinnedDomains": { "type": "array", "items": { "type": "string" } }
              }
            },
            "totals": {
              "type": "object", "additionalProperties": false,
              "required": ["requests", "allowed", "blocked", "failed", "reported", "hosts", "violations",
                           "ignoredConnections", "ignoredHosts", "clientUntrustedCA"],
              "properties": {
                "requests": { "$ref": "#/$defs/count" }, "allowed": { "$ref": "#/$defs/count" },
                "blocked": { "$ref": "#/$defs/count" }, "failed": { "$ref": "#/$defs/count" },
                "reported": { "$ref": "#/$defs/count" }, "hosts": { "$ref": "#/$defs/count" },
                "violations": { "$ref": "#/$defs/count" },
                "ignoredConnections": { "$ref": "#/$defs/count" }, "ignoredHosts": { "$ref": "#/$defs/count" },
                "clientUntrustedCA": { "$ref": "#/$defs/count" }
              }
            },
            "hosts": { "type": "array", "items": { "$ref": "#/$defs/host" } },
            "minimalDictionary": {
              "type": "object", "additionalProperties": false,
              "required": ["plist", "allowsLocalNetworking", "entries", "unfixable", "mergeRule", "roundTripVerified",
                           "notes"],
              "properties": {
                "plist": { "type": "string", "pattern": "^<key>NSAppTransportSecurity</key>\\n<dict>" },
                "allowsLocalNetworking": { "type": "boolean" },
                "entries": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["key", "includesSubdomains", "allowsInsecureHTTPLoads", "coveredHosts", "justifications"],
                    "properties": {
                      "key": { "type": "string", "minLength": 1 },
                      "includesSubdomains": { "type": "boolean" },
                      "allowsInsecureHTTPLoads": { "type": "boolean" },
                      "minimumTLSVersion": { "$ref": "#/$defs/tlsVersion" },
                      "requiresForwardSecrecy": { "const": false },
                      "coveredHosts": { "type": "array", "minItems": 1, "items": { "type": "string" } },
                      "justifications": { "type": "array", "items": { "type": "string" } }
                    }
                  }
                },
                "unfixable": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["host", "url", "reason"],
                    "properties": {
                      "host": { "type": "string" }, "url": { "type": "string" }, "code": { "type": "string" },
                      "reason": { "type": "string", "pattern": "^no Info\\.plist change can allow this" },
                      "fix": { "type": "string" }
                    }
                  }
                },
                "mergeRule": { "type": "string", "minLength": 1 },
                "roundTripVerified": { "type": "boolean" },
                "notes": { "type": "array", "items": { "type": "string" } }
              }
            },
            "comparison": {
              "type": "object", "additionalProperties": false,
              "required": ["unexercisedExceptions", "overBroad", "ignoredKeys"],
              "properties": {
                "unexercisedExceptions": { "type": "array", "items": { "$ref": "#/$defs/finding" } },
                "overBroad": { "type": "array", "items": { "$ref": "#/$defs/finding" } },
                "ignoredKeys": { "type": "array", "items": { "$ref": "#/$defs/finding" } }
              }
            }
          },
          "$defs": {
            "count": { "type": "integer", "minimum": 0 },
            "boolSetting": { "enum": ["absent", "YES", "NO"] },
            "tlsVersion": { "enum": ["TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"] },
            "status": { "enum": ["violation", "client-untrusted-ca", "trust-failure", "transport-failure", "ok"] },
            "finding": {
              "type": "object", "additionalProperties": false,
              "required": ["code", "keyPath", "message"],
              "properties": {
                "code": { "type": "string", "minLength": 1 }, "keyPath": { "type": "string" },
                "message": { "type": "string" }, "fix": { "type": "string" }
              }
            },
            "host": {
              "type": "object", "additionalProperties": false,
              "required": ["host", "status", "requests", "allowed", "blocked", "failed", "reported", "violations",
                           "bytesFromClient", "bytesToClient", "durationMilliseconds", "schemes", "sources",
                           "verdicts", "tls", "needs"],
              "properties": {
                "host": { "type": "string", "minLength": 1 },
                "status": { "$ref": "#/$defs/status" },
                "requests": { "$ref": "#/$defs/count" }, "allowed": { "$ref": "#/$defs/count" },
                "blocked": { "$ref": "#/$defs/count" }, "failed": { "$ref": "#/$defs/count" },
                "reported": { "$ref": "#/$defs/count" }, "violations": { "$ref": "#/$defs/count" },
                "bytesFromClient": { "$ref": "#/$defs/count" }, "bytesToClient": { "$ref": "#/$defs/count" },
                "durationMilliseconds": { "type": "number", "minimum": 0 },
                "schemes": { "type": "array", "items": { "enum": ["http", "https"] } },
                "sources": { "type": "array", "items": { "enum": ["urlsession", "webkit", "media"] } },
                "verdicts": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["result", "kind", "count", "rule", "exampleURL"],
                    "properties": {
                      "result": {
                        "enum": ["completed", "blocked-cleartext", "failed", "reported", "client-untrusted-ca"]
                      },
                      "code": { "type": "string", "pattern": "^-?\\d+( \\[-?\\d+:-?\\d+\\])?$" },
                      "kind": { "$ref": "#/$defs/status" },
                      "count": { "type": "integer", "minimum": 1 },
                      "rule": { "type": "string" }, "fix": { "type": "string" },
                      "exampleURL": { "type": "string" }
                    }
                  }
                },
                "tls": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false, "required": ["count"],
                    "properties": {
                      "version": { "type": "string" }, "cipher": { "type": "string" },
                      "keyExchange": { "type": "string" }, "leaf": { "type": "string" },
                      "leafKey": { "type": "string" }, "leafSignature": { "type": "string" },
                      "chainLength": { "type": "string" }, "alpn": { "type": "string" },
                      "count": { "type": "integer", "minimum": 1 }
                    }
                  }
                },
                "failedRule": { "type": "string" },
                "fix": { "type": "string" },
                "needs": {
                  "type": "object", "additionalProperties": false,
                  "required": ["cleartext", "forwardSecrecyWaiver", "assumptions", "unfixable"],
                  "properties": {
                    "cleartext": { "type": "boolean" },
                    "minimumTLSVersion": { "$ref": "#/$defs/tlsVersion" },
                    "forwardSecrecyWaiver": { "type": "boolean" },
                    "assumptions": { "type": "array", "items": { "type": "string" } },
                    "unfixable": { "type": "array", "items": { "type": "string" } }
                  }
                }
              }
            }
          }
        }
        """#
}
