#!/usr/bin/env bash
# Peers for homeward-bench: installs nats-server and mosquitto (Debian packages) if missing, makes a
# throwaway TLS certificate (EC P-256, like Homeward's development certificate), writes configs and
# starts/stops them on loopback.
#
#   bench/peers.sh start DIR [nats] [mosquitto] [cluster]   # nats and mosquitto when none named
#   bench/peers.sh stop DIR
#
# Ports: nats-server WebSocket over TLS 127.0.0.1:18444 (plain client port 127.0.0.1:14222, unused by
# the benchmark), mosquitto MQTT over TLS 127.0.0.1:18883. Pids go to DIR/nats.pid, DIR/mosquitto.pid.
# "cluster" is what the homeward-cluster relays share: PostgreSQL on 127.0.0.1:15432 (database
# homeward for the homeward-cluster relays and homeward_one for homeward-pg, user postgres, no password;
# initdb as the postgres user) and a second, plain nats-server
# as their bus on 127.0.0.1:14223 (DIR/bus.pid), its monitoring on 127.0.0.1:18222 (`writes` reads /connz
# there: the messages each relay received).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR [nats] [mosquitto]" >&2; exit 2; }
shift 2
peers=("$@")
[[ ${#peers[@]} -gt 0 ]] || peers=(nats mosquitto)

NATS_WS_PORT=${NATS_WS_PORT:-18444}
NATS_PORT=${NATS_PORT:-14222}
MQTT_PORT=${MQTT_PORT:-18883}
PG_PORT=${PG_PORT:-15432}
BUS_PORT=${BUS_PORT:-14223}
BUS_MONITOR_PORT=${BUS_MONITOR_PORT:-18222}

wait_port() {
  local port=$1
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$port" >&2
  return 1
}

stop_pid() {
  local file=$1
  [[ -f "$file" ]] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

case "$cmd" in
start)
  missing=()
  for peer in "${peers[@]}"; do
    case "$peer" in
      nats) command -v nats-server >/dev/null || missing+=(nats-server) ;;
      mosquitto) command -v mosquitto >/dev/null || missing+=(mosquitto) ;;
      cluster)
        command -v nats-server >/dev/null || missing+=(nats-server)
        compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=(postgresql)
        ;;
      *) echo "unknown peer $peer" >&2; exit 2 ;;
    esac
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >/dev/null
  fi

  mkdir -p "$dir"
  if [[ ! -f "$dir/server.pem" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$dir/server-key.pem" -out "$dir/server.pem" -days 30 -subj "/CN=127.0.0.1" \
      -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
  fi
  chmod 755 "$dir"
  # mosquitto drops root for its own user and must still read the key.
  if id mosquitto >/dev/null 2>&1; then chown mosquitto "$dir/server-key.pem"; fi
  chmod 640 "$dir/server-key.pem"

  ulimit -n 200000 || ulimit -n "$(ulimit -Hn)"

  for peer in "${peers[@]}"; do
    case "$peer" in
    nats)
      stop_pid "$dir/nats.pid"
      cat > "$dir/nats.conf" <<EOF
listen: "127.0.0.1:$NATS_PORT"
debug: ${NATS_DEBUG:-false}
max_connections: 200000
max_payload: 1MB
websocket {
  listen: "127.0.0.1:$NATS_WS_PORT"
  tls {
    cert_file: "$dir/server.pem"
    key_file: "$dir/server-key.pem"
  }
  compression: false
}
EOF
      nats-server -c "$dir/nats.conf" >"$dir/nats.log" 2>&1 &
      echo $! > "$dir/nats.pid"
      wait_port "$NATS_WS_PORT" || { cat "$dir/nats.log" >&2; exit 1; }
      ;;
    mosquitto)
      stop_pid "$dir/mosquitto.pid"
      cat > "$dir/mosquitto.conf" <<EOF
per_listener_settings false
allow_anonymous true
persistence false
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
listener $MQTT_PORT 127.0.0.1
certfile $dir/server.pem
keyfile $dir/server-key.pem
EOF
      mosquitto -c "$dir/mosquitto.conf" >"$dir/mosquitto.log" 2>&1 &
      echo $! > "$dir/mosquitto.pid"
      wait_port "$MQTT_PORT" || { cat "$dir/mosquitto.log" >&2; exit 1; }
      ;;
    cluster)
      stop_pid "$dir/bus.pid"
      nats-server -a 127.0.0.1 -p "$BUS_PORT" -m "$BUS_MONITOR_PORT" >"$dir/bus.log" 2>&1 &
      echo $! > "$dir/bus.pid"
      wait_port "$BUS_PORT" || { cat "$dir/bus.log" >&2; exit 1; }
      pgbin=$(compgen -G "/usr/lib/postgresql/*/bin" | sort -V | tail -n 1)
      as_postgres=()
      if [[ $(id -u) -eq 0 ]]; then as_postgres=(runuser -u postgres --); fi
      mkdir -p "$dir/pg"
      if [[ $(id -u) -eq 0 ]]; then chown postgres: "$dir/pg"; fi
      if [[ ! -f "$dir/pg/data/PG_VERSION" ]]; then
        "${as_postgres[@]}" "$pgbin/initdb" -D "$dir/pg/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$dir/pg.log" 2>&1 ||
          { cat "$dir/pg.log" >&2; exit 1; }
      fi
      "${as_postgres[@]}" "$pgbin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 60 start \
        -o "-h 127.0.0.1 -p $PG_PORT -k $dir/pg -c max_connections=200" >>"$dir/pg.log" 2>&1 ||
        { cat "$dir/pg.log" "$dir/pg/postgres.log" >&2; exit 1; }
      # homeward: the three relays of homeward-cluster; homeward_one: the single relay of homeward-pg.
      for database in homeward homeward_one; do
        "$pgbin/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE $database" >>"$dir/pg.log" 2>&1 || true
      done
      ;;
    esac
  done
  ;;
stop)
  stop_pid "$dir/nats.pid"
  stop_pid "$dir/mosquitto.pid"
  stop_pid "$dir/bus.pid"
  if [[ -f "$dir/pg/data/postmaster.pid" ]]; then
    pgbin=$(compgen -G "/usr/lib/postgresql/*/bin" | sort -V | tail -n 1)
    as_postgres=()
    if [[ $(id -u) -eq 0 ]]; then as_postgres=(runuser -u postgres --); fi
    "${as_postgres[@]}" "$pgbin/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  ;;
*)
  echo "usage: $0 start|stop DIR [nats] [mosquitto] [cluster]" >&2
  exit 2
  ;;
esac
