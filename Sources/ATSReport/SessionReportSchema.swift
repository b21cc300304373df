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
                       "totals", "hosts", "appTrust", "minimalDictionary", "comparison"],
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
                           "ignoredConnections", "ignoredHosts", "clientUntrustedCA", "challengePasses",
                           "challengeFindings", "pinningRealChainRefused", "pinningInterceptionRefused", "outcomes"],
              "properties": {
                "requests": { "$ref": "#/$defs/count" }, "allowed": { "$ref": "#/$defs/count" },
                "blocked": { "$ref": "#/$defs/count" }, "failed": { "$ref": "#/$defs/count" },
                "reported": { "$ref": "#/$defs/count" }, "hosts": { "$ref": "#/$defs/count" },
                "violations": { "$ref": "#/$defs/count" },
                "ignoredConnections": { "$ref": "#/$defs/count" }, "ignoredHosts": { "$ref": "#/$defs/count" },
                "clientUntrustedCA": { "$ref": "#/$defs/count" },
                "challengePasses": { "$ref": "#/$defs/count" }, "challengeFindings": { "$ref": "#/$defs/count" },
                "pinningRealChainRefused": { "$ref": "#/$defs/count" },
                "pinningInterceptionRefused": { "$ref": "#/$defs/count" },
                "outcomes": { "$ref": "#/$defs/outcomeCounts" }
              }
            },
            "hosts": { "type": "array", "items": { "$ref": "#/$defs/host" } },
            "appTrust": {
              "type": "object", "additionalProperties": false,
              "required": ["summary", "hosts"],
              "properties": {
                "summary": { "type": "string", "minLength": 1 },
                "hosts": { "type": "array", "items": { "$ref": "#/$defs/appTrustHost" } }
              }
            },
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
            "outcome": {
              "enum": ["allowed", "allowed by exception", "blocked", "failed", "network error", "reported",
                       "passthrough", "ignored", "challenge passed", "challenge finding"]
            },
            "outcomeCounts": {
              "type": "object", "propertyNames": { "$ref": "#/$defs/outcome" },
              "additionalProperties": { "type": "integer", "minimum": 1 }
            },
            "boolSetting": { "enum": ["absent", "YES", "NO"] },
            "tlsVersion": { "enum": ["TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"] },
            "status": { "enum": ["violation", "client-untrusted-ca", "trust-failure", "transport-failure", "ok"] },
            "route": {
              "enum": ["absolute-form", "CONNECT", "CONNECT+TLS", "CONNECT+HTTP", "CONNECT+h2c", "CONNECT+raw", "SOCKS5",
                       "SOCKS5+TLS", "SOCKS5+HTTP", "SOCKS5+h2c", "SOCKS5+raw", "SOCKS4", "TLS+absolute-form",
                       "TLS+CONNECT", "TLS+CONNECT+TLS", "TLS+CONNECT+HTTP", "TLS+CONNECT+h2c", "TLS+CONNECT+raw"]
            },
            "appTrustHost": {
              "type": "object", "additionalProperties": false,
              "required": ["host", "status", "challenges", "challengePasses", "challengeFindings"],
              "properties": {
                "host": { "type": "string", "minLength": 1 },
                "status": {
                  "enum": ["challenge-finding", "pinning-refuses-real-chain", "pinning-refuses-interception", "pass"]
                },
                "atsStatus": { "$ref": "#/$defs/status" },
                "pinning": {
                  "type": "object", "additionalProperties": false,
                  "required": ["policy", "scenario", "scenarioMeaning", "evaluations", "realChain", "interceptionChain"],
                  "properties": {
                    "policy": { "type": "string", "minLength": 1 },
                    "scenario": { "type": "integer", "minimum": 1, "maximum": 10 },
                    "scenarioMeaning": { "type": "string" },
                    "evaluations": { "type": "integer", "minimum": 1 },
                    "realChain": { "$ref": "#/$defs/chainVerdict" },
                    "interceptionChain": { "$ref": "#/$defs/chainVerdict" }
                  }
                },
                "challenges": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["kind", "verdict", "passes", "findings", "meaning"],
                    "properties": {
                      "kind": { "type": "string", "minLength": 1 },
                      "category": { "enum": ["certificate", "handshake"] },
                      "presents": { "type": "string" },
                      "verdict": { "enum": ["pass", "finding"] },
                      "passes": { "$ref": "#/$defs/count" }, "findings": { "$ref": "#/$defs/count" },
                      "meaning": { "type": "string" }
                    }
                  }
                },
                "challengePasses": { "$ref": "#/$defs/count" }, "challengeFindings": { "$ref": "#/$defs/count" }
              }
            },
            "chainVerdict": {
              "type": "object", "additionalProperties": false,
              "required": ["accepted", "acceptances", "refusals", "meaning"],
              "properties": {
                "accepted": { "type": "boolean" },
                "acceptances": { "$ref": "#/$defs/count" }, "refusals": { "$ref": "#/$defs/count" },
                "meaning": { "type": "string" }
              }
            },
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
              "required": ["host", "status", "requests", "allowed", "blocked", "failed", "reported", "violations", "outcomes",
                           "bytesFromClient", "bytesToClient", "durationMilliseconds", "schemes", "sources",
                           "routes", "verdicts", "tls", "needs"],
              "properties": {
                "host": { "type": "string", "minLength": 1 },
                "status": { "$ref": "#/$defs/status" },
                "requests": { "$ref": "#/$defs/count" }, "allowed": { "$ref": "#/$defs/count" },
                "blocked": { "$ref": "#/$defs/count" }, "failed": { "$ref": "#/$defs/count" },
                "reported": { "$ref": "#/$defs/count" }, "violations": { "$ref": "#/$defs/count" },
                "outcomes": { "$ref": "#/$defs/outcomeCounts" },
                "bytesFromClient": { "$ref": "#/$defs/count" }, "bytesToClient": { "$ref": "#/$defs/count" },
                "durationMilliseconds": { "type": "number", "minimum": 0 },
                "schemes": { "type": "array", "items": { "enum": ["http", "https"] } },
                "sources": { "type": "array", "items": { "enum": ["urlsession", "webkit", "media"] } },
                "routes": { "type": "array", "items": { "$ref": "#/$defs/route" } },
                "verdicts": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["result", "outcome", "kind", "count", "rule", "exampleURL"],
                    "properties": {
                      "result": {
                        "enum": ["completed", "blocked-cleartext", "failed", "refused", "reported", "client-untrusted-ca"]
                      },
                      "outcome": { "$ref": "#/$defs/outcome" },
                      "code": { "type": "string", "pattern": "^-?\\d+( \\[-?\\d+:-?\\d+\\])?$" },
                      "kind": { "$ref": "#/$defs/status" },
                      "count": { "type": "integer", "minimum": 1 },
                      "rule": { "type": "string" }, "fix": { "type": "string" },
                      "exampleURL": { "type": "string" }, "exampleRoute": { "$ref": "#/$defs/route" }
                    }
                  }
                },
                "tls": {
                  "type": "array",
                  "items": {
                    "type": "object", "additionalProperties": false, "required": ["count"],
                    "properties": {
                      "version": { "type": "string" }, "cipher": { "type": "string" },
                      "keyExchange": { "type": "string" }, "group": { "type": "string" },
                      "leaf": { "type": "string" },
                      "leafKey": { "type": "string" }, "leafSignature": { "type": "string" },
                      "chainLength": { "type": "string" }, "alpn": { "type": "string" },
                      "count": { "type": "integer", "minimum": 1 }
                    }
                  }
                },
                "failedRule": { "type": "string" },
                "fix": { "type": "string" },
                "http3": {
                  "type": "object", "additionalProperties": false, "required": ["responses", "alternatives", "note"],
                  "properties": {
                    "responses": { "type": "integer", "minimum": 1 },
                    "alternatives": {
                      "type": "array", "minItems": 1,
                      "items": {
                        "type": "object", "additionalProperties": false, "required": ["protocolID", "authority"],
                        "properties": {
                          "protocolID": { "type": "string", "pattern": "^h3(-\\d+)?$" },
                          "authority": { "type": "string", "minLength": 2 },
                          "maxAge": { "type": "integer", "minimum": 0 }
                        }
                      }
                    },
                    "note": { "type": "string", "minLength": 1 }
                  }
                },
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
                },
                "systemServices": {
                  "type": "object", "additionalProperties": false, "required": ["outcome", "platform", "reasons"],
                  "properties": {
                    "outcome": { "enum": ["pass", "fail"] },
                    "platform": { "type": "string" },
                    "reasons": { "type": "array", "items": { "type": "string" } }
                  }
                }
              }
            }
          }
        }
        """#
}
