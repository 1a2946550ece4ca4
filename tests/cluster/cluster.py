"""A Homeward cluster on loopback: PostgreSQL, nats-server, three relays and haproxy in front of them.

Used two ways:
- by the fault cases (tests/cluster/conftest.py starts one for the session), which kill and restart
  its parts;
- from the command line, to run a command against a running cluster and stop it afterwards:

      python tests/cluster/cluster.py RELAY_BIN run -- bash tests/python/run.sh
      python tests/cluster/cluster.py RELAY_BIN up          # until Ctrl-C; prints the URLs

  The command gets HOMEWARD_TEST_RELAY_URLS (n1, n2, n3, balancer), HOMEWARD_TEST_CA and
  HOMEWARD_TEST_RELAY_LOGS: the contract suite's cluster mode (tests/python/conftest.py).

It installs nothing (run.sh checks for postgresql, nats-server and haproxy) and listens on 127.0.0.1
only. Everything it starts it stops, also when a start fails, on Ctrl-C and on SIGTERM/SIGHUP.
The relays' process handling (start, kill -9, restart on the same port and data dir, logs) is the
contract suite's `Relay`; haproxy runs deploy/haproxy.cfg itself, its addresses given as variables.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
HAPROXY_CONFIG = REPO_ROOT / "deploy" / "haproxy.cfg"
NODE_IDS = ("n1", "n2", "n3")
# haproxy connects to the relays from this address (HOMEWARD_LB_SOURCE) and the relays trust PROXY headers
# from it alone (--proxy-protocol-from), as in production; the tests' own connections straight to a
# relay come from 127.0.0.1 and are served without a header.
BALANCER_SOURCE = "127.0.0.2"


def _contract_module(file: str, name: str):
    """tests/python/FILE as a module of its own name (both directories have a `conftest`, so the
    contract suite's directory is not put on the import path)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tests" / "python" / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


contract = _contract_module("conftest.py", "homeward_contract_conftest")
# The push service double and VAPID check of test_push.py (http_ece and cryptography, from its requirements).
push_double = _contract_module("push_double.py", "homeward_push_double")
free_port = contract.free_port


class ClusterError(RuntimeError):
    pass


def wait_until(what: str, check, timeout: float, interval: float = 0.1):
    """Polls `check` (a function returning a true value when done) until it holds; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ClusterError(f"{what}: not within {timeout} s")
        time.sleep(interval)  # polling interval of an outside process, not synchronisation


def tail(path: Path, limit: int = 4000) -> str:
    return path.read_bytes()[-limit:].decode("utf-8", "replace") if path.exists() else "(no log)"


def _stop_process(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 15):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------------------------- parts


class Postgres:
    """PostgreSQL in a directory of its own: initdb (as the postgres user when we are root, since
    PostgreSQL refuses to run as root), then `postgres` on 127.0.0.1 and a free port."""

    def __init__(self):
        self.bin = self.binaries()
        # Directly under /tmp (not in a 0700 directory of ours), so the postgres user can reach it.
        self.dir = Path(tempfile.mkdtemp(prefix="homeward-cluster-pg-"))
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.as_root = os.geteuid() == 0

    @staticmethod
    def binaries() -> Path | None:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
        return versions[-1].parent if versions else None

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}?sslmode=disable"

    def _as_postgres(self) -> list[str]:
        # setpriv execs in place (runuser would stay in between), so signals reach postgres itself.
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"] if self.as_root else []

    def init(self):
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run([*self._as_postgres(), str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                        "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                       check=True, capture_output=True, cwd=self.dir)

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self._as_postgres(), str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.dir),
             "-h", "127.0.0.1", "-p", str(self.port), "-c", "fsync=off", "-c", "full_page_writes=off"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir)
        log.close()
        wait_until("PostgreSQL to accept connections", self._accepting, 30)

    def _accepting(self) -> bool:
        if self.proc.poll() is not None:
            raise ClusterError(f"postgres exited with {self.proc.returncode}\n{tail(self.log_path)}")
        return subprocess.run([str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode == 0

    def stop(self):
        """Fast shutdown (SIGINT): open connections are closed, committed data is kept."""
        _stop_process(self.proc, signal.SIGINT, timeout=30)
        self.proc = None

    def restart(self):
        self.stop()
        self.start()

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                               "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class NatsServer:
    """One nats-server on 127.0.0.1; `kill()` is kill -9, `start()` again uses the same port."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.log_path = workdir / "nats-server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(self.port)],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        wait_until("nats-server to listen", lambda: self._exited() or _accepts(self.port), 15)
        self._exited()

    def _exited(self):
        if self.proc.poll() is not None:
            raise ClusterError(f"nats-server exited with {self.proc.returncode}\n{tail(self.log_path)}")
        return False

    def kill(self):
        _stop_process(self.proc, signal.SIGKILL)
        self.proc = None

    def stop(self):
        _stop_process(self.proc)
        self.proc = None


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


class Balancer:
    """haproxy running deploy/haproxy.cfg unchanged: the listen address, the relays' addresses, the
    address it connects to them from and the stats socket come in through the environment variables
    that file reads."""

    def __init__(self, workdir: Path, nodes: list):
        self.port = free_port()
        self.nodes = nodes
        self.stats_socket = workdir / "haproxy.sock"
        self.log_path = workdir / "haproxy.log"
        self.proc: subprocess.Popen | None = None

    def environment(self) -> dict:
        env = dict(os.environ)
        env["HOMEWARD_LB_BIND"] = f"127.0.0.1:{self.port}"
        env["HOMEWARD_LB_STATS_SOCKET"] = str(self.stats_socket)
        env["HOMEWARD_LB_SOURCE"] = BALANCER_SOURCE
        for i, node in enumerate(self.nodes, start=1):
            env[f"HOMEWARD_RELAY_{i}"] = f"127.0.0.1:{node.port}"
        return env

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", str(HAPROXY_CONFIG)], env=self.environment(),
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        wait_until("haproxy to see every relay up", lambda: self._exited() or self.up() == {n.node_id for n in self.nodes}, 30)

    def _exited(self):
        if self.proc.poll() is not None:
            raise ClusterError(f"haproxy exited with {self.proc.returncode}\n{tail(self.log_path)}")
        return False

    def server_states(self) -> dict:
        """{server name: status} from haproxy's own stats (UP, DOWN, ...), for the relays' backend."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.stats_socket))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        states = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == "relays" and row.get("svname") not in ("FRONTEND", "BACKEND"):
                states[row["svname"]] = row["status"]
        return states

    def up(self) -> set:
        with contextlib.suppress(OSError):
            return {name for name, status in self.server_states().items() if status.startswith("UP")}
        return set()

    def stop(self):
        _stop_process(self.proc)
        self.proc = None


class ClusterNode(contract.Relay):
    """One relay of the cluster: its own port and data directory, the shared store and bus."""

    def __init__(self, binary: str, workdir: Path, node_id: str, arguments: list[str]):
        super().__init__(binary, workdir)
        self.node_id = node_id
        self.extra_args = arguments


def relay_supports(binary: str, flag: str) -> bool:
    done = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return flag in done.stdout + done.stderr


# --------------------------------------------------------------------------------------------- cluster


class Cluster:
    """PostgreSQL + nats-server + relays n1, n2, n3 + haproxy. `start()` brings them up in that
    order, `stop()` ends everything started so far (also after a failed start)."""

    def __init__(self, binary: str, relay_args: list[str] | None = None):
        self.binary = str(Path(binary).resolve())
        self.relay_args = list(relay_args or [])
        self.workdir = Path(tempfile.mkdtemp(prefix="homeward-cluster-"))
        self.postgres = Postgres()
        self.nats = NatsServer(self.workdir)
        self.has_bus = relay_supports(self.binary, "--bus")
        self.nodes: list[ClusterNode] = []
        self.balancer: Balancer | None = None

    # -- lifecycle

    def start(self):
        self.postgres.init()
        self.postgres.start()
        self.postgres.psql("CREATE DATABASE homeward")
        self.nats.start()
        shared = ["--store", self.postgres.url("homeward"), "--proxy-protocol-from", f"{BALANCER_SOURCE}/32"]
        if self.has_bus:
            shared += ["--bus", self.nats.url]
        else:
            print("cluster: this relay has no --bus yet: the nodes share PostgreSQL only, and cross-node "
                  "delivery will fail", file=sys.stderr)
        for node_id in NODE_IDS:
            own = ["--node-id", node_id] if self.has_bus else []
            self.nodes.append(ClusterNode(self.binary, self.workdir / node_id, node_id, shared + own + self.relay_args))
        first, *others = self.nodes
        first.start()  # makes the development certificate the others then use too (one name behind haproxy)
        for node in others:
            shutil.copytree(first.data_dir / "certs", node.data_dir / "certs")
            node.start()
        self.balancer = Balancer(self.workdir, self.nodes)
        self.balancer.start()

    def stop(self):
        """Stops whatever runs, in reverse order, and removes the directories (unless HOMEWARD_CLUSTER_KEEP=1)."""
        for stop in ([self.balancer.stop] if self.balancer else []) + [n.stop for n in self.nodes] + \
                [self.nats.stop, self.postgres.stop]:
            with contextlib.suppress(Exception):
                stop()
        if os.environ.get("HOMEWARD_CLUSTER_KEEP") == "1":
            print(f"cluster: kept {self.workdir} and {self.postgres.dir}", file=sys.stderr)
            return
        self.postgres.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- what clients need

    @property
    def ca_path(self) -> Path:
        return self.nodes[0].ca_path

    @property
    def balancer_url(self) -> str:
        return f"wss://127.0.0.1:{self.balancer.port}/v1/ws"

    def environment(self) -> dict:
        """The contract suite's cluster mode: every node, then the balancer."""
        return {
            "HOMEWARD_TEST_RELAY_URLS": ",".join([n.ws_url for n in self.nodes] + [self.balancer_url]),
            "HOMEWARD_TEST_CA": str(self.ca_path),
            "HOMEWARD_TEST_RELAY_LOGS": ",".join([str(n.log_path) for n in self.nodes] + [""]),
        }

    def node(self, node_id: str | None) -> ClusterNode:
        """The relay that named itself `node_id` in a sign-in reply."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise AssertionError(f"no relay of this cluster is called {node_id!r} (the sign-in reply's node)")

    # -- faults

    def wait_balancer_sees(self, up: set, timeout: float = 15):
        wait_until(f"haproxy to see exactly {sorted(up)} up", lambda: self.balancer.up() == up, timeout)


def _terminate_on_signals():
    """SIGINT (also when started in the background, where it is inherited as ignored), SIGTERM and
    SIGHUP end the run like Ctrl-C does, so the `finally` blocks stop everything."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("relay_bin", help="the homeward-relay binary")
    parser.add_argument("--relay-arg", action="append", default=[], help="another flag for every relay (repeatable)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the cluster and keep it until Ctrl-C")
    run = sub.add_parser("run", help="start the cluster, run COMMAND against it, stop the cluster")
    run.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    _terminate_on_signals()
    try:
        with Cluster(args.relay_bin, args.relay_arg) as cluster:
            env = cluster.environment()
            for key, value in env.items():
                print(f"{key}={value}", file=sys.stderr)
            if args.command == "up":
                print("cluster up; Ctrl-C stops it", file=sys.stderr)
                signal.pause()
                return 0
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            child = subprocess.Popen(cmd, env={**os.environ, **env})
            try:
                return child.wait()
            finally:
                _stop_process(child)
    except KeyboardInterrupt:
        print("cluster: interrupted, stopped everything", file=sys.stderr)
        return 130
    except (ClusterError, subprocess.CalledProcessError, contract.pytest.fail.Exception) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"cluster: could not start: {exc} {detail.decode(errors='replace') if isinstance(detail, bytes) else detail}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
