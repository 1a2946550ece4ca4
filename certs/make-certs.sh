#!/usr/bin/env bash
# Make a private CA and a TLS server certificate for the Homeward relay.
# Run with -h for usage. Needs the openssl command line tool (OpenSSL 1.1.1 or later).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="$script_dir"
key_type="ec"
extra_names=()

ca_days=3650
server_days=825

usage() {
    cat <<USAGE
Usage: $(basename "$0") [-o DIR] [-n NAME]... [-t ec|rsa] HOST

Creates in DIR (default: $script_dir):
  ca.pem, ca-key.pem           a private CA, valid $ca_days days (reused if both files exist)
  server.pem, server-key.pem   a server certificate for HOST signed by that CA, valid
                               $server_days days; server.pem is the full chain (leaf, then CA)

HOST and every NAME go into subjectAltName: IPv4/IPv6 addresses as IP:, anything
else as DNS:. HOST is also the certificate's common name.

Options:
  -o DIR       output directory (created if missing)
  -n NAME      extra host name or IP address; repeat for more
  -t ec|rsa    key type for keys made now: EC P-256 (default) or RSA 3072
  -h           show this help

Examples:
  $(basename "$0") localhost -n 127.0.0.1 -n ::1
  $(basename "$0") -o /etc/homeward/tls relay.example.org -n 203.0.113.7

Running it again issues a new server key and certificate with the same CA, so
clients that trust ca.pem keep working. Delete ca.pem and ca-key.pem to start a new CA.
USAGE
}

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# Options may come before or after HOST.
positional=()
while [[ $# -gt 0 ]]; do
    OPTIND=1
    while getopts ":o:n:t:h" opt; do
        case "$opt" in
            o) out_dir="$OPTARG" ;;
            n) extra_names+=("$OPTARG") ;;
            t) key_type="$OPTARG" ;;
            h) usage; exit 0 ;;
            :) die "option -$OPTARG needs a value (see -h)" ;;
            *) die "unknown option -$OPTARG (see -h)" ;;
        esac
    done
    shift $((OPTIND - 1))
    if [[ $# -gt 0 ]]; then
        positional+=("$1")
        shift
    fi
done

[[ ${#positional[@]} -eq 1 ]] || { usage >&2; exit 2; }
host="${positional[0]}"

case "$key_type" in
    ec | rsa) ;;
    *) die "key type must be ec or rsa, not '$key_type'" ;;
esac

command -v openssl >/dev/null 2>&1 || die "the openssl command is not installed"

is_ipv4() {
    local IFS=. part
    local -a parts
    [[ "$1" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
    read -r -a parts <<<"$1"
    for part in "${parts[@]}"; do
        ((10#$part <= 255)) || return 1
    done
}

is_ipv6() {
    [[ "$1" == *:* && "$1" =~ ^[0-9A-Fa-f:.]+$ ]]
}

is_dns_name() {
    [[ "$1" =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$ ]] &&
        ((${#1} <= 253))
}

# Build the subjectAltName entries, HOST first, without duplicates.
san_lines=()
san_shown=()
seen=" "
dns_count=0
ip_count=0
for name in "$host" ${extra_names[@]+"${extra_names[@]}"}; do
    [[ "$seen" == *" $name "* ]] && continue
    seen+="$name "
    if is_ipv4 "$name" || is_ipv6 "$name"; then
        ip_count=$((ip_count + 1))
        san_lines+=("IP.$ip_count = $name")
        san_shown+=("IP:$name")
    elif [[ "$name" =~ ^[0-9.]+$ ]]; then
        die "'$name' is not a valid IPv4 address"
    elif is_dns_name "$name"; then
        dns_count=$((dns_count + 1))
        san_lines+=("DNS.$dns_count = $name")
        san_shown+=("DNS:$name")
    else
        die "'$name' is neither a host name nor an IP address"
    fi
done
((${#host} <= 64)) || die "HOST must be at most 64 characters (it is the common name); add longer names with -n"

mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
ca_cert="$out_dir/ca.pem"
ca_key="$out_dir/ca-key.pem"
server_cert="$out_dir/server.pem"
server_key="$out_dir/server-key.pem"

# Work next to the outputs so that the final mv is an atomic rename.
work="$(mktemp -d "$out_dir/.make-certs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 077

new_key() {
    if [[ "$key_type" == ec ]]; then
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
    else
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$1" 2>/dev/null
    fi
}

# RSA key exchange (TLS 1.2) needs keyEncipherment; an EC key only signs.
leaf_key_usage="digitalSignature"
[[ "$key_type" == rsa ]] && leaf_key_usage="digitalSignature, keyEncipherment"

cat >"$work/openssl.cnf" <<CNF
[req]
distinguished_name = dn
prompt = no

[dn]
CN = unused

[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, $leaf_key_usage
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = @alt_names

[alt_names]
$(printf '%s\n' "${san_lines[@]}")
CNF

# The CA: reuse it if present, otherwise make one.
if [[ -e "$ca_cert" || -e "$ca_key" ]]; then
    [[ -f "$ca_cert" && -f "$ca_key" ]] || die "found only one of ca.pem and ca-key.pem in $out_dir; restore the other or remove both"
    ca_pub="$(openssl x509 -in "$ca_cert" -noout -pubkey)" || die "cannot read $ca_cert"
    key_pub="$(openssl pkey -in "$ca_key" -pubout)" || die "cannot read $ca_key"
    [[ "$ca_pub" == "$key_pub" ]] || die "ca-key.pem does not belong to ca.pem in $out_dir"
    if ! openssl x509 -in "$ca_cert" -noout -checkend $((server_days * 86400)) >/dev/null; then
        echo "warning: $ca_cert expires within $server_days days, before the new server certificate;" >&2
        echo "         remove ca.pem and ca-key.pem to make a new CA (clients must then trust the new one)" >&2
    fi
    echo "Using existing CA $ca_cert"
else
    new_key "$work/ca-key.pem"
    openssl req -new -x509 -config "$work/openssl.cnf" -key "$work/ca-key.pem" -sha256 \
        -subj "/O=Homeward/CN=Homeward private CA $(date -u +%Y-%m-%d)" \
        -days "$ca_days" -extensions ca_ext -out "$work/ca.pem"
    chmod 600 "$work/ca-key.pem"
    chmod 644 "$work/ca.pem"
    mv "$work/ca-key.pem" "$ca_key"
    mv "$work/ca.pem" "$ca_cert"
    echo "Created CA $ca_cert (key $ca_key)"
fi

# The server key and certificate, always new.
new_key "$work/server-key.pem"
openssl req -new -config "$work/openssl.cnf" -key "$work/server-key.pem" -sha256 \
    -subj "/O=Homeward/CN=$host" -out "$work/server.csr"
openssl x509 -req -in "$work/server.csr" -sha256 -days "$server_days" \
    -CA "$ca_cert" -CAkey "$ca_key" -set_serial "0x$(openssl rand -hex 16)" \
    -extfile "$work/openssl.cnf" -extensions server_ext -out "$work/leaf.pem" 2>"$work/sign.log" ||
    { cat "$work/sign.log" >&2; die "signing the server certificate failed"; }
openssl verify -CAfile "$ca_cert" "$work/leaf.pem" >/dev/null || die "the new certificate does not verify against $ca_cert"

cat "$work/leaf.pem" "$ca_cert" >"$work/server.pem"
chmod 600 "$work/server-key.pem"
chmod 644 "$work/server.pem"
mv "$work/server-key.pem" "$server_key"
mv "$work/server.pem" "$server_cert"

echo "Created $server_cert (leaf + CA) and $server_key"
echo "  names:   ${san_shown[*]}"
echo "  expires: $(openssl x509 -in "$server_cert" -noout -enddate | cut -d= -f2)"
echo "Clients trust: $ca_cert"
