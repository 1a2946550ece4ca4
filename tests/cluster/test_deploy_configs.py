"""The configuration files deploy/ hands to operators are valid for the installed haproxy and nats-server
(the harness runs deploy/haproxy.cfg itself; deploy/nats-server.conf is for three hosts, so it is checked)."""

import os
import subprocess

from cluster import HAPROXY_CONFIG, REPO_ROOT


def test_haproxy_config_is_valid_with_its_production_defaults():
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOMEWARD_")}
    env["HOMEWARD_LB_STATS_SOCKET"] = "/tmp/homeward-haproxy-check.sock"  # /run/haproxy may not exist here
    done = subprocess.run(["haproxy", "-c", "-f", str(HAPROXY_CONFIG)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_nats_cluster_config_is_valid():
    env = {**os.environ, "NATS_SERVER_NAME": "nats1", "HOMEWARD_NATS_PASSWORD": "check"}
    done = subprocess.run(["nats-server", "-c", str(REPO_ROOT / "deploy" / "nats-server.conf"), "-t"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
