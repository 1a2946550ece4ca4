#!/usr/bin/env bash
# TLS checks against homeward-relay from outside, with the openssl command line tool only.
#
#   tests/tls/check-tls.sh RELAY_BIN
#
# Starts its own relays on 127.0.0.1 with temporary data directories (removed at the end,
# processes killed even on failure):
#   1. a relay with the generated development certificate;
#   2. a relay with a chain made by certs/make-certs.sh (leaf + CA).
# Prints PASS/FAIL per check and a closing "N passed, N failed"; exits non-zero on any failure.
#
# TLS 1.0/1.1 are attempted with `-cipher 'DEFAULT:@SECLEVEL=0'` so that the OpenSSL client
# (which refuses them at its default security level on Debian 12) really offers them, and a
# control s_server on TLS 1.0 proves the client can speak it: a failure then proves the *relay* refused.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
relay_bin="${1:-${HOMEWARD_RELAY_BIN:-}}"
[ -n "$relay_bin" ] && [ -x "$relay_bin" ] || { echo "usage: $0 RELAY_BIN (executable homeward-relay)" >&2; exit 2; }
command -v openssl >/dev/null || { echo "openssl not installed" >&2; exit 2; }

export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"
export HOMEWARD_REGISTRATIONS_PER_ADDRESS="${HOMEWARD_REGISTRATIONS_PER_ADDRESS:-0}"
work="$(mktemp -d "${TMPDIR:-/tmp}/homeward-tls.XXXXXX")"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS  $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      | /' | head -20; }
check() {  # check NAME CONDITION-EXIT-STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then pass "$1"; else fail "$1" "${3:-}"; fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000))
}

# start_relay NAME [extra args...]  -> sets $port, $data, $log
start_relay() {
    local name="$1"; shift
    data="$work/$name/data"; log="$work/$name/relay.log"
    mkdir -p "$data"
    port="$(free_port)"
    # No metrics listener: these checks are about TLS, and several relays run at once here (the default
    # listener, 127.0.0.1:9464, would be taken by the first).
    "$relay_bin" --host 127.0.0.1 --port "$port" --data-dir "$data" --metrics-listen off "$@" >"$log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    local deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "relay $name exited during start:" >&2; tail -20 "$log" >&2; return 1
        fi
        if echo | timeout 5 openssl s_client -connect "127.0.0.1:$port" -brief </dev/null >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2  # polling a condition with a deadline
    done
    echo "relay $name not ready in 60 s" >&2; tail -20 "$log" >&2
    return 1
}

# s_client ARGS... : one handshake, stdin closed; output in $out, exit status in $rc
s_client() {
    out="$(timeout 15 openssl s_client -connect "127.0.0.1:$port" "$@" </dev/null 2>&1)"
    rc=$?
}

negotiated() {  # prints the negotiated protocol of the last s_client, or nothing
    # "New, TLSv1.2, Cipher is X" after a handshake; "New, (NONE), Cipher is (NONE)" when none happened
    printf '%s\n' "$out" | sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is [^(].*/\1/p' | head -1
}

legacy_refused() {  # legacy_refused FLAG LABEL
    local flag="$1" label="$2"
    s_client "$flag" -cipher 'DEFAULT:@SECLEVEL=0' -servername localhost
    local proto; proto="$(negotiated)"
    if [ "$rc" -ne 0 ] && [ -z "$proto" ] && ! printf '%s' "$out" | grep -qi "no protocols available"; then
        pass "$label refused by the relay"
    else
        fail "$label refused by the relay (rc=$rc, negotiated '${proto}')" "$out"
    fi
}

modern_accepted() {  # modern_accepted FLAG EXPECTED LABEL CAFILE
    local flag="$1" want="$2" label="$3" ca="$4"
    s_client "$flag" -servername localhost -CAfile "$ca" -verify_return_error -verify_hostname localhost
    local proto; proto="$(negotiated)"
    if [ "$rc" -eq 0 ] && [ "$proto" = "$want" ] && printf '%s' "$out" | grep -q "Verify return code: 0 (ok)"; then
        pass "$label accepted ($proto, verified)"
    else
        fail "$label accepted (rc=$rc, negotiated '${proto}')" "$out"
    fi
}

served_chain() {  # served_chain FILE : the PEM certificates the server sent, into FILE
    s_client -servername localhost -showcerts
    printf '%s\n' "$out" | sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p' >"$1"
}

fingerprints() {  # fingerprints PEMFILE : one SHA-256 fingerprint per certificate, in order
    local tmp; tmp="$(mktemp -d "$work/split.XXXXXX")"
    awk -v d="$tmp" '/-----BEGIN CERTIFICATE-----/{n++} n{print > (d "/" n ".pem")}' "$1"
    local f
    for f in $(ls "$tmp" | sort -n); do
        openssl x509 -in "$tmp/$f" -noout -fingerprint -sha256
    done
}

# ------------------------------------------------------------------ control: the client can speak TLS 1.0
control_client_legacy() {
    local cdir="$work/control"; mkdir -p "$cdir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$cdir/k.pem" -out "$cdir/c.pem" -days 1 -subj /CN=control \
        >/dev/null 2>&1 || return 1
    local cport; cport="$(free_port)"
    openssl s_server -accept "127.0.0.1:$cport" -cert "$cdir/c.pem" -key "$cdir/k.pem" -tls1 \
        -cipher 'DEFAULT:@SECLEVEL=0' -quiet -naccept 1 >"$cdir/server.log" 2>&1 &
    local spid=$!
    pids+=("$spid")
    local ok=1 i
    for i in $(seq 50); do
        local o; o="$(timeout 5 openssl s_client -connect "127.0.0.1:$cport" -tls1 -cipher 'DEFAULT:@SECLEVEL=0' </dev/null 2>&1)"
        if printf '%s\n' "$o" | grep -Eq "New, TLSv1(\.0)?, Cipher is [^(]"; then ok=0; break; fi
        sleep 0.1
    done
    kill "$spid" 2>/dev/null
    return $ok
}
control_client_legacy
check "control: this openssl client can negotiate TLS 1.0 with SECLEVEL=0 (so a refusal below is the relay's)" $?

# ------------------------------------------------------------------ relay 1: development certificate
backend="${HOMEWARD_TLS_BACKEND:-nio-ssl}"
echo "== TLS backend: $backend (HOMEWARD_TLS_BACKEND)"
# Matched in the captured text: `ldd | grep -q` under pipefail fails whenever grep exits before ldd has
# written its last line (ldd then dies of SIGPIPE).
libraries="$(ldd "$relay_bin" 2>&1)"
[[ "$libraries" == *"libssl.so.3 => /"* ]]
check "the relay is linked against the system's libssl.so.3" $? "$(printf '%s\n' "$libraries" | grep -i ssl)"

out="$(timeout 20 "$relay_bin" --host 127.0.0.1 --port 0 --data-dir "$work/bad-backend" --tls-backend gnutls 2>&1)"
rc=$?
[ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "tls-backend must be openssl or nio-ssl"
check "--tls-backend gnutls is refused with a clear message" $? "$out"
out="$(HOMEWARD_TLS_BACKEND=boringssl timeout 20 "$relay_bin" --host 127.0.0.1 --port 0 --data-dir "$work/bad-backend" 2>&1)"
rc=$?
[ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "tls-backend must be openssl or nio-ssl"
check "HOMEWARD_TLS_BACKEND=boringssl is refused with a clear message" $? "$out"
# Kernel TLS cannot be served (the OpenSSL handler uses memory BIOs; this machine's kernel has no tls
# module either): the flag stops the relay with exit 1 and the reasons, on either backend.
out="$(timeout 20 "$relay_bin" --host 127.0.0.1 --port 0 --data-dir "$work/ktls" --tls-backend "$backend" --ktls 2>&1)"
rc=$?
[ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q "cannot use kernel TLS (--ktls): " \
    && printf '%s' "$out" | grep -q "memory buffers" && [ ! -e "$work/ktls" ]
check "--ktls on $backend: exit 1 before listening, naming why kernel TLS cannot serve" $? "rc=$rc $out"
if ! grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null; then
    printf '%s' "$out" | grep -q "the kernel has no tls module loaded"
    check "--ktls names the missing kernel tls module" $? "$out"
fi

echo "== relay with the generated development certificate"
if start_relay dev; then
    ca="$data/certs/dev-ca.pem"
    case "$backend" in
        openssl) grep -q "TLS by the system's OpenSSL" "$log" ;;
        *) grep -q "TLS by swift-nio-ssl" "$log" ;;
    esac
    check "the relay logs that $backend serves TLS" $? "$(grep -i 'TLS by' "$log")"
    [ -s "$ca" ]; check "dev CA written to the data dir ($ca)" $?
    grep -q "dev-ca.pem" "$log"; check "relay logs the dev CA path" $?

    legacy_refused -tls1 "TLS 1.0"
    legacy_refused -tls1_1 "TLS 1.1"
    modern_accepted -tls1_2 TLSv1.2 "TLS 1.2" "$ca"
    modern_accepted -tls1_3 TLSv1.3 "TLS 1.3" "$ca"

    s_client -servername localhost -CAfile "$ca" -verify_return_error -verify_hostname localhost
    [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q "Verify return code: 0 (ok)"
    check "dev CA verifies server name 'localhost'" $? "$out"

    s_client -CAfile "$ca" -verify_return_error -verify_ip 127.0.0.1
    [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q "Verify return code: 0 (ok)"
    check "dev CA verifies IP 127.0.0.1" $? "$out"

    s_client -servername wrong.example -CAfile "$ca" -verify_return_error -verify_hostname wrong.example
    [ "$rc" -ne 0 ]
    check "dev certificate is refused for another name (wrong.example)" $? "$out"

    s_client -servername localhost -verify_return_error -CApath /nonexistent -CAfile /dev/null
    [ "$rc" -ne 0 ]
    check "without the dev CA the server certificate does not verify" $? "$out"

    # ALPN: http/1.1 is chosen when offered; a client offering only other protocols still connects.
    s_client -servername localhost -CAfile "$ca" -alpn http/1.1
    [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q "^ALPN protocol: http/1.1"
    check "ALPN: http/1.1 offered, http/1.1 chosen" $? "$(printf '%s\n' "$out" | grep -i alpn)"
    s_client -servername localhost -CAfile "$ca" -alpn h2
    [ "$rc" -eq 0 ] && [ -n "$(negotiated)" ]
    check "ALPN: a client offering only h2 still connects" $? "$out"

    # SNI: any name is accepted (one certificate serves all); no SNI at all works too.
    s_client -servername homeward.invalid -CAfile "$ca"
    [ -n "$(negotiated)" ]
    check "SNI: a handshake naming another server still completes" $? "$out"
    s_client -noservername -CAfile "$ca"
    [ -n "$(negotiated)" ]
    check "SNI: a handshake without a server name completes" $? "$out"

    # Ciphers: TLS 1.2 only with forward-secret AEAD suites.
    for weak in AES128-SHA AES256-GCM-SHA384 ECDHE-RSA-AES128-SHA ECDHE-ECDSA-AES128-SHA DES-CBC3-SHA; do
        s_client -tls1_2 -cipher "$weak:@SECLEVEL=0" -servername localhost
        [ -z "$(negotiated)" ]
        check "TLS 1.2 cipher $weak (no forward secrecy or no AEAD) refused" $? "$(printf '%s\n' "$out" | grep -E '^New|Cipher')"
    done
    s_client -tls1_2 -cipher 'ECDHE+AESGCM:ECDHE+CHACHA20' -servername localhost -CAfile "$ca"
    printf '%s' "$out" | grep -Eq "^New, TLSv1.2, Cipher is ECDHE-(RSA|ECDSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)"
    check "TLS 1.2 negotiates an ECDHE AEAD suite" $? "$(printf '%s\n' "$out" | grep -E '^New')"

    # No compression (CRIME).
    s_client -servername localhost -CAfile "$ca" -tls1_2
    printf '%s' "$out" | grep -q "^Compression: NONE"
    check "no TLS compression" $? "$(printf '%s\n' "$out" | grep -i compression)"

    # No renegotiation: a TLS 1.2 client asking to renegotiate ("R" on s_client's input) gets no second handshake.
    reneg="$( (sleep 1; echo R; sleep 2) | timeout 10 openssl s_client -connect "127.0.0.1:$port" -tls1_2 -servername localhost -CAfile "$ca" 2>&1)"
    handshakes="$(printf '%s\n' "$reneg" | grep -c '^depth=0')"
    printf '%s' "$reneg" | grep -q "^RENEGOTIATING" && [ "$handshakes" -eq 1 ]
    check "TLS 1.2 renegotiation refused (server certificate seen $handshakes time(s))" $? "$(printf '%s\n' "$reneg" | grep -Ei 'reneg|alert|depth=0|error' | head -8)"

    # Session tickets: a second connection resumes the first one's session. swift-nio-ssl's server does
    # not resume TLS 1.3 sessions for s_client, so that one is checked on the OpenSSL backend only.
    versions="-tls1_2"
    [ "$backend" = "openssl" ] && versions="-tls1_2 -tls1_3"
    for version in $versions; do
        rm -f "$work/session.pem"
        ( sleep 1 ) | timeout 10 openssl s_client -connect "127.0.0.1:$port" $version -servername localhost -CAfile "$ca" \
            -sess_out "$work/session.pem" >/dev/null 2>&1
        s_client $version -servername localhost -CAfile "$ca" -sess_in "$work/session.pem"
        printf '%s' "$out" | grep -q "^Reused, TLSv1"
        check "session ticket resumption ($version)" $? "$(printf '%s\n' "$out" | grep -E '^(New|Reused)')"
    done

    served_chain "$work/dev-served.pem"
    openssl verify -CAfile "$ca" -verify_hostname localhost "$work/dev-served.pem" >/dev/null 2>&1
    check "openssl verify: served leaf verifies against the dev CA" $?

    # A WebSocket upgrade over TLS works (so the plain-TCP check below is meaningful).
    req=$'GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'
    out="$( (printf '%s' "$req"; sleep 2) | timeout 10 openssl s_client -connect "127.0.0.1:$port" -servername localhost -quiet 2>/dev/null)"
    # Matched without a pipeline: under pipefail, `printf | head -1` can fail with SIGPIPE when head
    # closes the pipe before printf has written everything (the frames after the 101), a false FAIL.
    [[ "$out" == "HTTP/1.1 101"* ]]
    check "WebSocket upgrade over TLS answers 101" $? "$(printf '%s' "$out" | head -3)"

    # Plain TCP, no TLS: the same upgrade request must not get a WebSocket.
    plain="$(python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
data = b""
try:
    while len(data) < 4096:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError as exc:
    data += f"<{type(exc).__name__}>".encode()
print(repr(data[:200]))
PY
)"
    ! printf '%s' "$plain" | grep -q "101"
    check "plain TCP (no TLS) to the port gets no WebSocket (got ${plain:0:80})" $?

    out="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/healthz" 2>/dev/null)"
    [ "$out" != "200" ]
    check "plain HTTP (no TLS) /healthz is not served (got '${out}')" $?

    out="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$ca" "https://localhost:$port/healthz" --resolve "localhost:$port:127.0.0.1" 2>/dev/null)"
    [ "$out" = "200" ]
    check "HTTPS /healthz verified with the dev CA answers 200 (got '${out}')" $?
else
    fail "relay with the development certificate starts"
fi

# ------------------------------------------------------------------ relay 2: a chain from certs/make-certs.sh
echo "== relay with a chain made by certs/make-certs.sh"
certdir="$work/made-certs"
if bash "$repo/certs/make-certs.sh" -o "$certdir" localhost -n 127.0.0.1 >"$work/make-certs.log" 2>&1; then
    pass "certs/make-certs.sh made a CA and a server chain"
    if start_relay made --tls-cert "$certdir/server.pem" --tls-key "$certdir/server-key.pem"; then
        served_chain "$work/made-served.pem"
        want="$(fingerprints "$certdir/server.pem")"
        got="$(fingerprints "$work/made-served.pem")"
        n_want="$(printf '%s\n' "$want" | grep -c Fingerprint)"
        [ -n "$want" ] && [ "$want" = "$got" ]
        check "the configured chain is served, in order ($n_want certificates)" $? "want:
$want
got:
$got"
        modern_accepted -tls1_2 TLSv1.2 "made chain: TLS 1.2" "$certdir/ca.pem"
        modern_accepted -tls1_3 TLSv1.3 "made chain: TLS 1.3" "$certdir/ca.pem"
        legacy_refused -tls1 "made chain: TLS 1.0"
        legacy_refused -tls1_1 "made chain: TLS 1.1"
        s_client -CAfile "$certdir/ca.pem" -verify_return_error -verify_ip 127.0.0.1
        [ "$rc" -eq 0 ]
        check "made chain: CA verifies IP 127.0.0.1" $? "$out"
        ! grep -q "dev-ca.pem" "$log" && [ ! -e "$data/certs/dev-ca.pem" ]
        check "made chain: no development certificate generated" $?
    else
        fail "relay with the make-certs.sh chain starts" "$(tail -20 "$log")"
    fi
else
    fail "certs/make-certs.sh made a CA and a server chain" "$(cat "$work/make-certs.log")"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
