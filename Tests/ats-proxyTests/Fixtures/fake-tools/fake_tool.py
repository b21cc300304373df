#!/usr/bin/env python3
"""Stand-ins for the macOS and Linux tools ats-proxy drives (networksetup, security, xcrun simctl, sqlite3
on a Simulator's trust store, update-ca-certificates), for tests on Linux. Linked under each tool's name in a directory put first on
PATH. Every call is appended to $FAKE_TOOLS_DIR/calls.log (one JSON array per line: tool name, then the
arguments); the tools' state (network services and their proxies, booted simulators, failures to
simulate) lives in $FAKE_TOOLS_DIR/state.json, which the tests write and read. The answers copy the real
tools' wording, including their failures: no network service, permission denied, no booted simulator."""
import base64
import hashlib
import json
import os
import sys

DIR = os.environ["FAKE_TOOLS_DIR"]
STATE_PATH = os.path.join(DIR, "state.json")


def load():
    with open(STATE_PATH) as handle:
        return json.load(handle)


def save(state):
    with open(STATE_PATH, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)


def fail(state, key):
    """The failure the test asked for at this step, if any: {"key": [message, status, stream]}."""
    return state.get("fail", {}).get(key)


def answer(failure):
    message, status, stream = failure
    (sys.stderr if stream == "stderr" else sys.stdout).write(message + "\n")
    sys.exit(status)


def networksetup(args, state):
    services = state.setdefault("services", [])
    proxies = state.setdefault("proxies", {})
    command = args[0] if args else ""
    if command == "-listallnetworkservices":
        print("An asterisk (*) denotes that a network service is disabled.")
        for service in services:
            print(service)
        return
    enabled = [name for name in services if not name.startswith("*")]
    all_names = [name.lstrip("*") for name in services]
    if len(args) < 2 or args[1] not in all_names:
        # The real tool prints this and exits 0.
        print("%s is not a recognized network service." % (args[1] if len(args) > 1 else ""))
        print("** Error: The parameters were not valid.")
        return
    service = args[1]
    kind = "web" if "securewebproxy" not in command else "secureWeb"
    entry = proxies.setdefault(service, {}).setdefault(kind, {"enabled": False, "server": "", "port": 0})
    if command in ("-getwebproxy", "-getsecurewebproxy"):
        print("Enabled: %s" % ("Yes" if entry["enabled"] else "No"))
        print("Server: %s" % entry["server"])
        print("Port: %d" % entry["port"])
        print("Authenticated Proxy Enabled: 0")
        return
    if command in ("-setwebproxy", "-setsecurewebproxy"):
        failure = fail(state, "set:%s:%s" % (service, kind)) or fail(state, "set")
        if failure:
            answer(failure)
        entry.update({"enabled": True, "server": args[2], "port": int(args[3])})
    elif command in ("-setwebproxystate", "-setsecurewebproxystate"):
        failure = fail(state, "state")
        if failure:
            answer(failure)
        entry["enabled"] = args[2] == "on"
    else:
        print("** Error: Unknown command %s" % command)
        sys.exit(1)
    save(state)
    del enabled


def xcrun(args, state):
    if args[:1] != ["simctl"]:
        sys.stderr.write("xcrun: error: unable to find utility \"%s\"\n" % (args[0] if args else ""))
        sys.exit(72)
    args = args[1:]
    devices = state.setdefault("simulators", [])
    if args[:2] == ["list", "devices"]:
        booted = [d for d in devices if d["state"] == "Booted"] if "booted" in args else devices
        print(json.dumps({"devices": {"com.apple.CoreSimulator.SimRuntime.iOS-18-0": booted}}, indent=2))
        return
    if args[:1] == ["keychain"] and len(args) >= 3:
        device, action = args[1], args[2]
        if device == "booted":
            booted = [d for d in devices if d["state"] == "Booted"]
            if not booted:
                sys.stderr.write("No devices are booted.\n")
                sys.exit(149)
            device = booted[0]["udid"]
        match = [d for d in devices if d["udid"] == device]
        if not match:
            sys.stderr.write("Invalid device: %s\n" % device)
            sys.exit(164)
        if match[0]["state"] != "Booted":
            sys.stderr.write(
                "An error was encountered processing the command (domain=com.apple.CoreSimulator.SimError, "
                "code=405):\nUnable to lookup in current state: Shutdown\n")
            sys.exit(149)
        roots = match[0].setdefault("roots", [])
        if action == "add-root-cert":
            roots.append(args[3])
            # The real simctl writes the root into the device's TrustStore.sqlite3 (read by `doctor`).
            store = trust_store(match[0]["udid"])
            os.makedirs(os.path.dirname(store), exist_ok=True)
            open(store, "a").close()
        elif action == "reset":
            roots.clear()
        save(state)
        return
    sys.stderr.write("Unrecognized subcommand: %s\n" % " ".join(args))
    sys.exit(64)


def security(args, state):
    keychain = state.setdefault("keychain", [])
    command = args[0] if args else ""
    failure = fail(state, command)
    if failure:
        answer(failure)
    if command == "add-trusted-cert":
        keychain.append(args[-1])
    elif command == "verify-cert":
        path = args[args.index("-c") + 1]
        if path not in keychain:
            sys.stdout.write("Cert Verify Result: CSSMERR_TP_NOT_TRUSTED\n")
            sys.exit(1)
        sys.stdout.write("...certificate verification successful.\n")
        return
    elif command == "remove-trusted-cert":
        if args[-1] not in keychain:
            sys.stderr.write("SecTrustSettingsRemoveTrustSettings: The specified item could not be found in the keychain.\n")
            sys.exit(1)
    elif command == "delete-certificate":
        if not keychain:
            sys.stderr.write("Unable to delete certificate matching \"%s\"\n" % args[2])
            sys.exit(1)
        keychain.pop()
    else:
        sys.stderr.write("security: unknown command \"%s\"\n" % command)
        sys.exit(2)
    save(state)


def trust_store(udid):
    return os.path.join(os.environ["HOME"], "Library/Developer/CoreSimulator/Devices", udid,
                        "data/private/var/protected/trustd/private/TrustStore.sqlite3")


def sha256_of_pem(path):
    """The SHA-256 of a PEM certificate's DER, upper-case hex (as sqlite's hex() prints a blob)."""
    with open(path) as handle:
        body = "".join(line.strip() for line in handle if line.strip() and not line.startswith("-----"))
    return hashlib.sha256(base64.b64decode(body)).hexdigest().upper()


def sqlite3(args, state):
    """Answers `sqlite3 -readonly STORE "SELECT hex(sha256) FROM tsettings"` for a simulator's trust store:
    the fingerprints of the roots `simctl keychain add-root-cert` added to that device."""
    store, query = args[-2], args[-1]
    if query != "SELECT hex(sha256) FROM tsettings" or not os.path.exists(store):
        sys.stderr.write("Error: unable to open database \"%s\": unable to open database file\n" % store)
        sys.exit(1)
    for device in state.get("simulators", []):
        if trust_store(device["udid"]) == store:
            for root in device.get("roots", []):
                print(sha256_of_pem(root))


def update_ca_certificates(args, state):
    failure = fail(state, "update-ca-certificates")
    if failure:
        answer(failure)
    state.setdefault("updates", 0)
    state["updates"] += 1
    save(state)
    print("Updating certificates in /etc/ssl/certs...")
    print("1 added, 0 removed; done.")


def main():
    tool = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    with open(os.path.join(DIR, "calls.log"), "a") as log:
        log.write(json.dumps([tool] + args) + "\n")
    state = load()
    {"networksetup": networksetup, "xcrun": xcrun, "security": security, "sqlite3": sqlite3,
     "update-ca-certificates": update_ca_certificates}[tool](args, state)


main()
