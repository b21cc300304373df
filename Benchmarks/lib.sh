# Benchmarks/lib.sh: the environment Benchmarks/run, compare and profile share. Sourced, not run.
#
# bench_tools        finds (or installs) nginx, h2load and socat
# bench_build        builds the proxy and the load generator (see Benchmarks/README.md)
# bench_start        mints certificates, starts the origin nginx and the proxy in its default
#                    configuration, smoke-tests both paths
# start_proxy        starts one more proxy (same flags plus extra ones, own port, CA and log)
# bench_start_rp     (after bench_start; Benchmarks/run only) starts the reference nginx reverse
#                    proxy and smoke-tests it
#
# Afterwards: TMP, ORIGIN_PORT (offers h2 and HTTP/1.1 by ALPN, as real servers do), ORIGIN_H1_PORT
# (HTTP/1.1 only), ORIGIN_H2_PORT (= ORIGIN_PORT, kept for older callers), STATUS_PORT, PROXY_PORT,
# RP_PORT, AUTHORITY, H1_AUTHORITY, H2_AUTHORITY (= AUTHORITY), NGINX_PID, PROXY_PID, RP_PID,
# ORIGIN_PIDS, RP_PIDS, PROXY_CA, PROXY_FLAGS (the proxy's command line after the binary),
# DIRECT=(...), PROXIED=(...), NGINX_RP=(...) (loadgen arguments), LOADGEN, PROXY_BIN, MEASURED,
# UPSTREAM_PROTOCOL (what the origin saw from the proxy: HTTP/2.0 when the proxy took h2).
# Every process started here is killed by PID on exit (trap).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/Benchmarks"
BIG_BYTES=$((100 * 1024 * 1024))

say() { printf '%s\n' "$*" >&2; }
die() { say "$(basename "$0"): $*"; exit 1; }

# --- tools ---------------------------------------------------------------------------------------
apt_install() { # packages...
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    say "installing $* (Debian) ..."
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null \
        || { $sudo apt-get update >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null; }
}

bench_tools() {
    NGINX=$(command -v nginx || true)
    [ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
    if [ -z "$NGINX" ]; then
        apt_install nginx-light
        NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    fi
    [ -x "$NGINX" ] || die "nginx not found"
    # The h2 phase: h2load (nghttp2-client) as the generator, socat as the CONNECT shim.
    local missing=()
    command -v h2load >/dev/null || missing+=(nghttp2-client)
    command -v socat >/dev/null || missing+=(socat)
    [ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
    H2LOAD=$(command -v h2load || true)
    SOCAT=$(command -v socat || true)
}

# --- builds (separate scratch paths; never .build) ----------------------------------------------
# The proxy is built from the working tree (scratch .build-bench). BENCH_REF=<commit> builds that
# commit instead, from a `git archive` export in .build-bench-src; the export is also the fallback
# when the working tree does not build (other people may be mid-edit). BENCH_PROXY_BIN=PATH
# measures a binary built elsewhere.
build_ref() {
    local ref=$1 commit
    commit=$(git -C "$ROOT" rev-parse "$ref^{commit}") || die "unknown commit $ref"
    # Re-export only when the commit changed, so an unchanged commit builds incrementally.
    if [ "$(cat "$ROOT/.build-bench-src/commit" 2>/dev/null)" != "$commit" ]; then
        rm -rf "$ROOT/.build-bench-src/tree"
        mkdir -p "$ROOT/.build-bench-src/tree"
        git -C "$ROOT" archive "$commit" | tar -x -C "$ROOT/.build-bench-src/tree"
        echo "$commit" >"$ROOT/.build-bench-src/commit"
    fi
    (cd "$ROOT/.build-bench-src/tree" && swift build -c release --scratch-path "$ROOT/.build-bench-src/scratch") \
        >"$build_log" 2>&1 || { grep -E 'error' "$build_log" | head -20 >&2; die "build of $ref failed"; }
    PROXY_BIN="$ROOT/.build-bench-src/scratch/release/ats-proxy"
    MEASURED="commit $(git -C "$ROOT" rev-parse --short "$ref")"
}

bench_build() {
    build_log=$(mktemp)
    PROXY_BIN="$ROOT/.build-bench/release/ats-proxy"
    MEASURED="working tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    git -C "$ROOT" diff --quiet HEAD -- Sources Package.swift 2>/dev/null || MEASURED="$MEASURED + uncommitted changes"
    if [ -n "${BENCH_PROXY_BIN:-}" ]; then
        PROXY_BIN=$BENCH_PROXY_BIN
        MEASURED="binary $BENCH_PROXY_BIN${BENCH_LABEL:+ ($BENCH_LABEL)}"
    elif [ "${BENCH_SKIP_BUILD:-0}" = 1 ]; then
        [ -n "${BENCH_REF:-}" ] && PROXY_BIN="$ROOT/.build-bench-src/scratch/release/ats-proxy" \
            && MEASURED="last build of commit ${BENCH_REF}"
    elif [ -n "${BENCH_REF:-}" ]; then
        say "building ats-proxy at $BENCH_REF (release, .build-bench-src) ..."
        build_ref "$BENCH_REF"
    else
        say "building ats-proxy (release, .build-bench) ..."
        if ! (cd "$ROOT" && swift build -c release --scratch-path "$ROOT/.build-bench") >"$build_log" 2>&1; then
            grep -E 'error' "$build_log" | head -5 >&2
            say "the working tree does not build; benchmarking HEAD instead"
            build_ref HEAD
        fi
    fi
    if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
        say "building the load generator (release, .build-bench-loadgen) ..."
        swift build -c release --package-path "$BENCH/LoadGen" --scratch-path "$ROOT/.build-bench-loadgen" \
            >"$build_log" 2>&1 || { cat "$build_log" >&2; die "load generator build failed"; }
    fi
    rm -f "$build_log"
    LOADGEN="$ROOT/.build-bench-loadgen/release/loadgen"
    [ -x "$PROXY_BIN" ] || die "missing $PROXY_BIN (build failed?)"
    [ -x "$LOADGEN" ] || die "missing $LOADGEN (build failed?)"
}

# --- processes -----------------------------------------------------------------------------------
NGINX_PID=""
PROXY_PID=""
EXTRA_PIDS=()
cleanup() {
    local pid
    for pid in "${EXTRA_PIDS[@]}" "$PROXY_PID" "$NGINX_PID"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    for pid in "${EXTRA_PIDS[@]}" "$PROXY_PID" "$NGINX_PID"; do
        [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
    done
    [ -n "${TMP:-}" ] && rm -rf "$TMP"
}

# A free port below the kernel's ephemeral range (so no outgoing connection can hold it), never
# one this script already handed out.
USED_PORTS=" "
free_port() { # VARIABLE: sets it to the port
    local _fp_port _fp_low
    _fp_low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    while :; do
        _fp_port=$((10000 + RANDOM % (_fp_low - 10000)))
        [[ "$USED_PORTS" == *" $_fp_port "* ]] && continue
        ss -Hatn "sport = :$_fp_port" | grep -q . && continue
        USED_PORTS="$USED_PORTS$_fp_port "
        printf -v "$1" '%s' "$_fp_port"
        return
    done
}

wait_listen() { # port pid what
    local i
    for i in $(seq 1 200); do
        ss -Hltn "sport = :$1" | grep -q . && return 0
        kill -0 "$2" 2>/dev/null || die "$3 exited at startup"
        sleep 0.05
    done
    die "$3 did not listen on $1"
}

bench_start() {
    TMP=$(mktemp -d /tmp/ats-bench.XXXXXX)
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    free_port ORIGIN_PORT
    free_port ORIGIN_H1_PORT
    free_port STATUS_PORT
    ORIGIN_H2_PORT=$ORIGIN_PORT
    AUTHORITY="bench.test:$ORIGIN_PORT"
    H1_AUTHORITY="bench.test:$ORIGIN_H1_PORT"
    H2_AUTHORITY=$AUTHORITY

    # Certificates: ECDSA P-256 test CA + leaf for bench.test (serverAuth, 30 days).
    say "minting the origin's test CA and leaf in $TMP ..."
    (
        cd "$TMP"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
            -days 30 -sha256 -subj "/CN=ats-proxy benchmark CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr \
            -subj "/CN=bench.test" 2>/dev/null
        cat >leaf.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:bench.test
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
        openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 \
            -extfile leaf.ext -out leaf.pem 2>/dev/null
        cat leaf.pem ca.pem >chain.pem
    )

    # Origin: nginx on 127.0.0.1. The main port offers h2 and HTTP/1.1 in ALPN, as most real
    # servers do, so an HTTP/1.1 client through the proxy (default --http2 on) gets an h2 upstream.
    # The second port is HTTP/1.1 only, for the rows labelled "HTTP/1.1-only origin".
    # /proto answers with the protocol the origin saw (the upstream check below).
    mkdir -p "$TMP/www" "$TMP/logs" "$TMP/temp"
    truncate -s "$BIG_BYTES" "$TMP/www/big"
    chmod -R a+rX "$TMP/www"
    chmod a+x "$TMP"
    cat >"$TMP/nginx.conf" <<EOF
daemon off;
worker_processes 2;
worker_rlimit_nofile 20000;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path $TMP/temp/body;
    proxy_temp_path $TMP/temp/proxy;
    fastcgi_temp_path $TMP/temp/fastcgi;
    uwsgi_temp_path $TMP/temp/uwsgi;
    scgi_temp_path $TMP/temp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$ORIGIN_PORT ssl http2;
        listen 127.0.0.1:$ORIGIN_H1_PORT ssl;
        server_name bench.test;
        ssl_certificate $TMP/chain.pem;
        ssl_certificate_key $TMP/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location = /tiny { return 200 "ok"; }
        location = /proto { return 200 "\$server_protocol"; }
        location = /big { root $TMP/www; }
    }
    server {
        listen 127.0.0.1:$STATUS_PORT;
        location = /status { stub_status; }
    }
}
EOF
    "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/logs/error.log" &
    NGINX_PID=$!
    wait_listen "$ORIGIN_PORT" "$NGINX_PID" nginx
    sleep 0.2
    ORIGIN_PIDS=$(pgrep -P "$NGINX_PID" | tr '\n' ' ')
    [ -n "$ORIGIN_PIDS" ] || die "no nginx workers"

    # The proxy, in the configuration a user runs: no tuning flags, so --diagnostics 1 (one text
    # line per request) to stderr, here redirected to TMP/logs/proxy.log, and --http2 on. Only what
    # the setup needs: a CA directory, name resolution for bench.test and the test CA as an extra
    # upstream trust anchor. BENCH_PROXY_ARGS adds flags.
    PROXY_FLAGS=(--resolve "bench.test:$ORIGIN_PORT:127.0.0.1" --resolve "bench.test:$ORIGIN_H1_PORT:127.0.0.1"
        --upstream-ca "$TMP/ca.pem")
    start_proxy proxy
    PROXY_PID=$STARTED_PID
    PROXY_PORT=$STARTED_PORT
    PROXY_CA=$STARTED_CA

    local pid
    origin_pid_args=()
    for pid in $ORIGIN_PIDS; do origin_pid_args+=(--origin-pid "$pid"); done
    DIRECT=(--origin "127.0.0.1:$ORIGIN_PORT" --authority "$AUTHORITY" --ca "$TMP/ca.pem"
        "${origin_pid_args[@]}")
    PROXIED=(--origin "127.0.0.1:$ORIGIN_PORT" --proxy "127.0.0.1:$PROXY_PORT" --authority "$AUTHORITY"
        --ca "$PROXY_CA" --proxy-pid "$PROXY_PID" "${origin_pid_args[@]}")

    # Smoke test both paths before measuring anything, and record which protocol the proxy's
    # upstream leg took (HTTP/2.0 expected with the default --http2 on).
    curl -sS --fail -o /dev/null --cacert "$TMP/ca.pem" --resolve "$AUTHORITY:127.0.0.1" "https://$AUTHORITY/tiny" \
        || die "direct smoke request failed"
    curl -sS --fail -o /dev/null -x "http://127.0.0.1:$PROXY_PORT" --cacert "$PROXY_CA" "https://$AUTHORITY/tiny" \
        || { cat "$TMP/logs/proxy.log" >&2; die "proxied smoke request failed"; }
    UPSTREAM_PROTOCOL=$(upstream_protocol "$PROXY_PORT" "$PROXY_CA" "$AUTHORITY")
}

# The protocol the origin saw for one HTTP/1.1 request through a proxy (HTTP/2.0 or HTTP/1.1).
upstream_protocol() { # proxy-port proxy-ca authority
    curl -sS --fail --http1.1 -x "http://127.0.0.1:$1" --cacert "$2" "https://$3/proto" 2>/dev/null || echo "?"
}

# One ats-proxy with the benchmark's flags (PROXY_FLAGS, then BENCH_PROXY_ARGS) plus FLAGS, on a
# port of its own, with its CA in TMP/NAME-ca and its stderr (the default text log) in
# TMP/logs/NAME.log. Sets STARTED_PID, STARTED_PORT and STARTED_CA; the process is killed on exit.
start_proxy() { # name [flags...]
    local name=$1
    shift
    free_port STARTED_PORT
    mkdir -p "$TMP/$name-ca"
    # shellcheck disable=SC2086 # BENCH_PROXY_ARGS is a list of flags, split on purpose
    "$PROXY_BIN" --listen "127.0.0.1:$STARTED_PORT" --ca-dir "$TMP/$name-ca" "${PROXY_FLAGS[@]}" \
        ${BENCH_PROXY_ARGS:-} "$@" 2>"$TMP/logs/$name.log" &
    STARTED_PID=$!
    EXTRA_PIDS+=("$STARTED_PID")
    wait_listen "$STARTED_PORT" "$STARTED_PID" "ats-proxy ($name)"
    STARTED_CA="$TMP/$name-ca/ats-proxy-ca.pem"
    [ -f "$STARTED_CA" ] || die "the proxy ($name) did not write its CA to $STARTED_CA"
}

# The reference: a second nginx as a TLS-terminating reverse proxy that re-originates TLS to the
# origin's main port over pooled keep-alive connections, on its own port. The client talks to it
# as to the origin (TLS to bench.test, verified against the test CA; h2 or HTTP/1.1 by ALPN); what
# it costs per request is what a mature C proxy costs on this machine, in this run. nginx's proxy
# module speaks only HTTP/1.x upstream, so its upstream leg is HTTP/1.1 whatever the origin offers.
# The body goes through memory buffers of 16 KiB (a TLS record), never a temporary file.
bench_start_rp() {
    free_port RP_PORT
    mkdir -p "$TMP/rp/logs" "$TMP/rp/temp"
    cat >"$TMP/rp/nginx.conf" <<EOF
daemon off;
worker_processes 2;
worker_rlimit_nofile 20000;
pid $TMP/rp/nginx.pid;
error_log $TMP/rp/logs/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $TMP/rp/temp/body;
    proxy_temp_path $TMP/rp/temp/proxy;
    fastcgi_temp_path $TMP/rp/temp/fastcgi;
    uwsgi_temp_path $TMP/rp/temp/uwsgi;
    scgi_temp_path $TMP/rp/temp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    upstream origin {
        server 127.0.0.1:$ORIGIN_PORT;
        keepalive 256;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$RP_PORT ssl http2;
        server_name bench.test;
        ssl_certificate $TMP/chain.pem;
        ssl_certificate_key $TMP/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass https://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $AUTHORITY;
            proxy_ssl_server_name on;
            proxy_ssl_name bench.test;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $TMP/ca.pem;
            proxy_ssl_session_reuse on;
            proxy_buffer_size 16k;
            proxy_buffers 8 16k;
            proxy_busy_buffers_size 32k;
            proxy_max_temp_file_size 0;
        }
    }
}
EOF
    "$NGINX" -p "$TMP/rp" -c "$TMP/rp/nginx.conf" -e "$TMP/rp/logs/error.log" &
    RP_PID=$!
    EXTRA_PIDS+=("$RP_PID")
    wait_listen "$RP_PORT" "$RP_PID" "nginx-rp"
    sleep 0.2
    RP_PIDS=$(pgrep -P "$RP_PID" | tr '\n' ' ')
    [ -n "$RP_PIDS" ] || die "no nginx-rp workers"
    local pid
    NGINX_RP=(--origin "127.0.0.1:$RP_PORT" --authority "$AUTHORITY" --ca "$TMP/ca.pem")
    for pid in $RP_PIDS; do NGINX_RP+=(--proxy-pid "$pid"); done
    NGINX_RP+=("${origin_pid_args[@]}")
    curl -sS --fail -o /dev/null --cacert "$TMP/ca.pem" --resolve "bench.test:$RP_PORT:127.0.0.1" \
        -H "Host: $AUTHORITY" "https://bench.test:$RP_PORT/tiny" \
        || { cat "$TMP/rp/logs/error.log" >&2; die "nginx-rp smoke request failed"; }
    RP_UPSTREAM_PROTOCOL=$(curl -sS --fail --http1.1 --cacert "$TMP/ca.pem" \
        --resolve "bench.test:$RP_PORT:127.0.0.1" "https://bench.test:$RP_PORT/proto" 2>/dev/null || echo "?")
}

# CPU seconds (utime + stime) of the given pids, from /proc/PID/stat.
cpu_seconds() { # pids...
    local pid total=0 ticks
    ticks=$(getconf CLK_TCK)
    for pid in "$@"; do
        [ -r "/proc/$pid/stat" ] || continue
        total=$((total + $(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat")))
    done
    awk -v t="$total" -v k="$ticks" 'BEGIN { printf "%.3f", t / k }'
}

# CPU seconds of the reaped children of a process (cutime + cstime), minus `base`.
child_cpu_seconds() { # pid [base]
    local ticks
    ticks=$(getconf CLK_TCK)
    [ -r "/proc/$1/stat" ] || { echo 0; return; }
    awk -v k="$ticks" -v b="${2:-0}" '{ sub(/.*\) /, ""); printf "%.3f", ($14 + $15) / k - b }' "/proc/$1/stat"
}
