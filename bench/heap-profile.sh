#!/usr/bin/env bash
# Heap profile of a relay holding idle authenticated TLS connections: where the bytes per connection are.
#
#   bench/heap-profile.sh [BACKEND] [CONNECTIONS] [OUTPUT_DIR]
#
# BACKEND is the relay's --tls-backend (openssl, the default, or nio-ssl), CONNECTIONS how many idle
# connections homeward-bench opens (default 2000), OUTPUT_DIR where the profile and its summary go (default
# a new temporary directory, printed at the end). Installs heaptrack (Debian) with apt-get when it is missing.
# Uses the release build of homeward-bench and homeward-relay (HOMEWARD_BIN_DIR, default .build/release).
#
# The relay runs under heaptrack's preload library, exec'd from a wrapper so that homeward-bench measures
# the relay's own process; the profile is written raw and interpreted afterwards. The summary lists the
# allocation sites holding the most memory at the peak (all connections open, 3 s after the last), as bytes
# per connection (bench/heap-summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."

backend=${1:-openssl}
connections=${2:-2000}
out=${3:-$(mktemp -d /tmp/homeward-heap-XXXXXX)}
bin_dir=${HOMEWARD_BIN_DIR:-.build/release}
mkdir -p "$out"

if ! command -v heaptrack_print >/dev/null 2>&1; then
  echo "== installing heaptrack"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq heaptrack
fi
preload=$(dpkg -L libheaptrack 2>/dev/null | grep '/libheaptrack_preload.so$' | head -n 1)
interpret=$(dpkg -L heaptrack libheaptrack 2>/dev/null | grep '/heaptrack_interpret$' | head -n 1)
[ -f "$preload" ] && [ -x "$interpret" ] || { echo "heaptrack's preload library or interpreter not found" >&2; exit 1; }

relay=$(readlink -f "$bin_dir/homeward-relay")
wrapper="$out/homeward-relay"
cat >"$wrapper" <<EOF
#!/bin/sh
exec env LD_PRELOAD="$preload" DUMP_HEAPTRACK_OUTPUT="$out/relay.raw" "$relay" "\$@"
EOF
chmod +x "$wrapper"

echo "== homeward-bench idle: $connections connections to a relay on $backend under heaptrack"
"$bin_dir/homeward-bench" idle --broker "homeward-$backend" --counts "$connections" --relay-binary "$wrapper" \
  --output "$out/idle.md" 2>"$out/bench.log" | tail -n 12

echo "== interpreting the profile"
"$interpret" <"$out/relay.raw" | gzip >"$out/relay.heaptrack.gz"
rm -f "$out/relay.raw"
heaptrack_print --file "$out/relay.heaptrack.gz" --print-peaks 1 --print-allocators 0 --print-temporary 0 \
  --print-leaks 0 --peak-limit 25 --sub-peak-limit 4 >"$out/peaks.txt"
heaptrack_print --file "$out/relay.heaptrack.gz" --print-peaks 0 --print-allocators 0 --print-temporary 0 \
  --print-leaks 0 --print-flamegraph "$out/peak.folded" --flamegraph-cost-type peak >/dev/null

echo "== bytes per connection by allocation site at the peak (bench/heap-summary.py)"
python3 bench/heap-summary.py "$out/peak.folded" "$connections" 25 | tee "$out/summary.md"
echo "profile: $out/relay.heaptrack.gz (heaptrack_print -f ...); top sites with backtraces: $out/peaks.txt"
