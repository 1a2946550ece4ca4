#!/usr/bin/env python3
"""Bytes per connection by allocation site, from heaptrack's folded stacks of peak memory.

    bench/heap-summary.py PEAK_FOLDED CONNECTIONS [TOP]

PEAK_FOLDED is `heaptrack_print --print-flamegraph FILE --flamegraph-cost-type peak` output: one line per
stack, frames from the root to the allocation, then the bytes that stack held at the peak. A stack is
charged to the OpenSSL call it went through (SSL_new, SSL_do_handshake, ...) or else to the innermost
Swift function of the relay or of NIO; Swift names are demangled with `swift demangle` when it is on PATH.
The relay's baseline (what it holds with no connection) is in the totals too: divide by CONNECTIONS only
what grows with them.
"""
import collections
import shutil
import subprocess
import sys

OPENSSL_CALLS = ("SSL_new", "SSL_do_handshake", "SSL_read", "SSL_write", "SSL_shutdown", "SSL_free_buffers",
                 "SSL_CTX_", "BIO_write", "BIO_new")


def site(frames):
    for frame in frames:
        for call in OPENSSL_CALLS:
            if frame.startswith(call):
                return "OpenSSL " + call.rstrip("_")
    for frame in reversed(frames):
        if "Homeward" in frame or "NIO" in frame:
            return frame.split(" (")[0]
    return "other (runtime, libc, start-up)"


def demangle(names):
    swift = shutil.which("swift")
    mangled = [name for name in names if name.startswith("$s")]
    if not swift or not mangled:
        return {}
    result = subprocess.run([swift, "demangle", "--simplified", "--compact"], input="\n".join(mangled),
                            capture_output=True, text=True)
    if result.returncode != 0:
        return {}
    return dict(zip(mangled, result.stdout.splitlines()))


def main():
    path, connections = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    by_site = collections.Counter()
    total = 0
    with open(path) as folded:
        for line in folded:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            total += int(count)
            by_site[site(stack.split(";"))] += int(count)
    names = demangle([name for name, _ in by_site.most_common(top)])
    print(f"peak heap {total / 1024 / 1024:.1f} MiB = {total / connections:.0f} B per connection "
          f"with {connections} connections (baseline included)")
    print("| bytes per connection | where |")
    print("|---:|---|")
    for name, count in by_site.most_common(top):
        print(f"| {count / connections:.0f} | {names.get(name, name)[:160]} |")


if __name__ == "__main__":
    main()
