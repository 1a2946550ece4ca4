"""Web Push doubles shared by the contract suite (test_push.py) and the cluster cases (tests/cluster):
a push service on 127.0.0.1 (plain HTTP) that records every POST, a subscribing browser that decrypts
what it gets with third-party code (http_ece, RFC 8291 aes128gcm), and the check of a push's VAPID
token with `cryptography` (ES256 signature with the key the relay publishes, aud, exp, sub).
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

SUBJECT = "mailto:ops@example.org"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ------------------------------------------------------------------------------ the doubles


class Received:
    def __init__(self, path: str, headers: dict, body: bytes, status: int):
        self.path = path
        self.headers = headers
        self.body = body
        self.status = status
        self.at = time.monotonic()


class PushServiceDouble:
    """An HTTP server on loopback that answers each path from a script (default 201) and records
    every request. Threads hand requests over through a condition variable."""

    def __init__(self):
        self.requests: list[Received] = []
        self.scripts: dict[str, list[tuple[int, dict]]] = {}
        self.cond = threading.Condition()
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with double.cond:
                    script = double.scripts.get(self.path)
                    status, extra = script.pop(0) if script else (201, {})
                    double.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                    body, status))
                    double.cond.notify_all()
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *answers: tuple[int, dict]):
        with self.cond:
            self.scripts[path] = list(answers)

    def to(self, path: str) -> list[Received]:
        with self.cond:
            return [r for r in self.requests if r.path == path]

    async def wait_for(self, path: str, count: int = 1, timeout: float = 15, match=None) -> list[Received]:
        """Waits until `count` requests to `path` (those `match` accepts, when given) have arrived."""
        def mine():
            return [r for r in self.requests if r.path == path and (match is None or match(r))]

        def wait():
            with self.cond:
                self.cond.wait_for(lambda: len(mine()) >= count, timeout)
                return mine()
        got = await asyncio.to_thread(wait)
        assert len(got) >= count, f"{path}: {len(got)} requests within {timeout}s, expected {count}"
        return got

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Browser:
    """A subscriber: its own P-256 key and auth secret, and an endpoint path on the double."""

    def __init__(self, double: PushServiceDouble):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = secrets.token_bytes(16)
        self.path = f"/push/{secrets.token_hex(8)}"
        self.endpoint = double.url(self.path)
        self.double = double

    def subscription(self) -> dict:
        public = self.key.public_key().public_bytes(serialization.Encoding.X962,
                                                    serialization.PublicFormat.UncompressedPoint)
        return {"kind": "webpush", "endpoint": self.endpoint, "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}

    def decrypt(self, received: Received) -> dict:
        plaintext = http_ece.decrypt(received.body, private_key=self.key, auth_secret=self.auth, version="aes128gcm")
        return json.loads(plaintext)


def check_vapid(received: Received, vapid_public_key: str, origin: str):
    """The Authorization header is `vapid t=JWT, k=KEY`: an ES256 JWT signed with the relay's key."""
    scheme, _, params = received.headers["authorization"].partition(" ")
    assert scheme == "vapid", received.headers
    fields = dict(part.strip().split("=", 1) for part in params.split(","))
    assert fields["k"] == vapid_public_key
    header_b64, claims_b64, signature_b64 = fields["t"].split(".")
    header = json.loads(unb64url(header_b64))
    assert header["alg"] == "ES256" and header["typ"] == "JWT", header
    claims = json.loads(unb64url(claims_b64))
    assert claims["aud"] == origin, claims
    assert claims["sub"] == SUBJECT, claims
    now = time.time()
    assert now < claims["exp"] <= now + 24 * 3600, claims
    signature = unb64url(signature_b64)
    assert len(signature) == 64
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(vapid_public_key))
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    public.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if forged
