"""The one table of what the relay must answer to hostile input.

Every fuzz case names a row here; the fuzzer checks the relay's answer against it, and
`fuzz.py --print-table` prints it as the Markdown table in docs/conformance.md.

An expectation is a dict:
  close:  set of WebSocket close codes the relay may send (the connection must then end), or None
          when the connection must stay open (proved by a `ping` request answered afterwards);
  error:  the error code the relay must send first (a reply or an id-less error), or None;
  note:   the contract clause it comes from.
"""

OPEN = None

EXPECTED: dict[str, dict] = {
    # ---------------------------------------------------------------- frame level (RFC 6455)
    "frame.rsv_bits": dict(close={1002}, error=None, where="frame", note="RSV1-3 set without an extension (RFC 6455 5.2)"),
    "frame.unknown_opcode": dict(close={1002}, error=None, where="frame", note="opcodes 0x3-0x7, 0xB-0xF (5.2)"),
    "frame.unmasked": dict(close={1002}, error=None, where="frame", note="client frame without a mask (5.1)"),
    "frame.control_too_long": dict(close={1002}, error=None, where="frame", note="ping/pong/close payload over 125 bytes (5.5)"),
    "frame.control_fragmented": dict(close={1002}, error=None, where="frame", note="control frame with FIN=0 (5.5)"),
    "frame.continuation_without_start": dict(close={1002}, error=None, where="frame", note="opcode 0 with no message open (5.4)"),
    "frame.interleaved_fragments": dict(close={1002}, error=None, where="frame", note="a new text/binary frame before the fragmented one ended (5.4)"),
    "frame.length_lies_short": dict(close={1002}, error=None, where="frame", note="header says fewer bytes than sent: the rest is read as the next frame header (here with RSV bits: 1002; the short part may first get bad_request)"),
    "frame.length_lies_long": dict(close=OPEN, error=None, where="frame", note="header says more bytes than sent: relay waits for them, answers nothing, other clients unaffected (idle timeout ends it)"),
    "frame.length_64bit_huge": dict(close={1009}, error="too_large", where="frame", note="64-bit length up to 2^63-1, over the message limit: too_large then 1009"),
    "frame.length_64bit_msb": dict(close={1002, 1009}, error=None, where="frame", note="64-bit length with the most significant bit set (5.2: MUST be 0)"),
    "frame.length_over_limit": dict(close={1009}, error="too_large", where="frame", note="one frame over --max-message-bytes: too_large then 1009"),
    "frame.fragments_over_limit": dict(close={1009}, error="too_large", where="frame", note="fragments adding up to more than the limit: too_large then 1009"),
    "frame.too_many_fragments": dict(close={1009}, error="too_large", where="frame", note="more than 1024 fragments in one message: too_large then 1009"),
    "frame.invalid_utf8": dict(close={1007}, error=None, where="frame", note="text frame that is not UTF-8 (overlong, surrogate, > U+10FFFF, truncated)"),
    "frame.invalid_utf8_fragments": dict(close={1007}, error=None, where="frame", note="invalid UTF-8 only visible across fragments"),
    "frame.valid_utf8_split": dict(close=OPEN, error=None, where="frame", note="a multi-byte character split across fragments is fine: served normally"),
    "frame.ping_between_fragments": dict(close=OPEN, error=None, where="frame", note="ping inside a fragmented message: pong, then the message is served (5.4)"),
    "frame.ping": dict(close=OPEN, error=None, where="frame", note="ping gets a pong with the same payload"),
    "frame.pong_unsolicited": dict(close=OPEN, error=None, where="frame", note="unsolicited pong is ignored (5.5.3)"),
    "frame.binary": dict(close=OPEN, error="unsupported", where="frame", note="binary frame: error unsupported, connection stays open"),
    "frame.empty_text": dict(close=OPEN, error="bad_request", where="frame", note="empty text frame: not JSON"),
    "frame.close_valid": dict(close={1000}, error=None, where="frame", note="close with no body or a valid code (1000-1003, 1007-1011, 3000-4999): relay answers 1000"),
    "frame.close_invalid_code": dict(close={1002}, error=None, where="frame", note="close code 0-999, 1004-1006, 1012-2999 (reserved/unassigned), 1015, 5000+ (7.4)"),
    "frame.close_one_byte": dict(close={1002}, error=None, where="frame", note="close body of exactly one byte (5.5.1)"),
    "frame.close_invalid_utf8_reason": dict(close={1002, 1007}, error=None, where="frame", note="close reason that is not UTF-8 (5.5.1, 8.1)"),
    "frame.random": dict(close="oracle", error="oracle", where="frame", note="random header bits/opcode/mask/length/payload: expected from the rules above"),
    # ---------------------------------------------------------------- handshake / transport
    "http.oversized_headers": dict(close="http-4xx", error=None, where="handshake", note="upgrade with 100 KB of headers: 4xx (431/400), no 101, connection closed"),
    "http.many_headers": dict(close="http-4xx", error=None, where="handshake", note="upgrade with 20 000 headers (200 KB, over the HTTP parser's 80 KB header limit): 4xx, no 101"),
    "http.bad_version": dict(close="no-101", error=None, where="handshake", note="Sec-WebSocket-Version: 8: no 101"),
    "http.no_key": dict(close="no-101", error=None, where="handshake", note="upgrade without Sec-WebSocket-Key: no 101"),
    "http.garbage": dict(close="http-4xx", error=None, where="handshake", note="binary garbage instead of HTTP after TLS: 400 and close"),
    "http.pipelined_unread": dict(close="closed", error=None, where="handshake", note="4 connections pipelining 10 000 GET /metrics each and never reading: closed by the relay once its socket is full; RSS grows < 64 MB (before the fix ~5 KB per request, ~200 MB)"),
    "tls.garbage": dict(close="closed", error=None, where="handshake", note="garbage instead of a TLS ClientHello: connection closed, no HTTP"),
    "tls.slow_handshake": dict(close="closed-by-timeout", error=None, where="handshake", note="TLS + HTTP upgrade sent one byte a second: closed by the relay after the 10 s handshake timeout"),
    "tls.half_open": dict(close="closed-by-timeout", error=None, where="handshake", note="many TCP connections that never speak, and TLS connections that never send HTTP: closed after 10 s"),
    # ---------------------------------------------------------------- control-frame floods and slow readers
    "control.ping_flood_unread": dict(close="closed", error=None, where="control", note="empty masked pings in a tight loop for 2 s, never reading, before signing in: closed by the relay (1008, or dropped when the close frame cannot be written); RSS grows < 64 MB; an unrelated pair's alarm arrives within 1.5 s (typically < 0.1 s; before the fix: ~1 GB in 3 s, alarms after 3.6-4.9 s)"),
    "control.ping_flood_read": dict(close={1008}, error=None, where="control", note="the same flood from a client that reads its pongs: close 1008 (at most one pong per read burst; before the fix +420 MB)"),
    "control.pong_flood_unread": dict(close="closed", error=None, where="control", note="unsolicited masked pongs in a tight loop, never reading: closed like a ping flood"),
    "control.mixed_flood_read": dict(close={1008}, error=None, where="control", note="pings and pongs alternating, reading: close 1008"),
    "control.long_ids_unread": dict(close="closed-or-open", error=None, where="control", note="4 signed-in connections each sending 256 requests with a 60 KB id and never reading: each is answered `bad_request` without `re`; RSS grows < 64 MB and is given back; an unrelated alarm arrives within 1 s (the reported attack, 16 x 1024 such requests: 870 MB, kept after close)"),
    # ---------------------------------------------------------------- message level
    "msg.long_id": dict(close=OPEN, error="bad_request", where="message", note="string `id` over 128 bytes (129 B, 129 B of 3-byte characters, 60 KB): `bad_request` without `re`; 128 bytes is echoed"),
    "msg.not_json": dict(close=OPEN, error="bad_request", where="message", note="not JSON (garbage, trailing data, comments, single quotes, BOM, trailing comma)"),
    "msg.not_object": dict(close=OPEN, error="bad_request", where="message", note="JSON that is not an object"),
    "msg.nan_infinity": dict(close=OPEN, error="bad_request", where="message", note="NaN / Infinity / -Infinity literals"),
    "msg.huge_number": dict(close=OPEN, error="bad_request", where="message", note="1e400, -1e400 anywhere: numbers must be finite"),
    "msg.deep_nesting": dict(close=OPEN, error="bad_request", where="message", note="nesting deeper than 32 (up to ~30 000 levels)"),
    "msg.lone_surrogate": dict(close=OPEN, error="bad_request", where="message", note="\\ud800 escape without a pair"),
    "msg.bad_id": dict(close=OPEN, error="bad_request", where="message", note="id that is not a string or a 64-bit integer (float, 2^63, bool, object)"),
    "msg.bad_type": dict(close=OPEN, error="bad_request", where="message", note="type missing or not a string"),
    "msg.unknown_type": dict(close=OPEN, error="unsupported", where="message", note="unknown type"),
    "msg.wrong_field_type": dict(close=OPEN, error="bad_request", where="message", note="every field of every request with a value of the wrong JSON type"),
    "msg.out_of_range": dict(close=OPEN, error="bad_request", where="message", note="lat/lon/hdg/batt/acc/ts/ttl/radius out of range, strings over their limits, bad usernames"),
    "msg.duplicate_keys": dict(close=OPEN, error="any", where="message", note="duplicate member names: one of them is used; answered, never a crash"),
    "msg.unicode_edges": dict(close=OPEN, error="any", where="message", note="NUL, BOM, RTL override, combining marks, emoji, non-characters in strings: answered, never a crash"),
    "msg.long_strings": dict(close=OPEN, error="bad_request", where="message", note="strings over a field's limit (up to 60 KB; also one letter with limit combining marks: limits count Unicode scalars)"),
    "msg.mutated": dict(close=OPEN, error="any", where="message", note="a valid request mutated at random: ok or a contract error code, never internal, never a close"),
    "msg.burst": dict(close=OPEN, error="any", where="message", note="30 mutated requests back to back without waiting: exactly one reply per id, in request order"),
    "msg.random_json": dict(close=OPEN, error="any", where="message", note="random JSON values and objects: ok or a contract error code, never internal, never a close"),
    # ---------------------------------------------------------------- valid messages in invalid states
    "state.session_accept_twice": dict(close=OPEN, error="conflict", where="state", note="accepting a session already followed"),
    "state.session_decline_after_accept": dict(close=OPEN, error="conflict", where="state", note="declining a followed session"),
    "state.session_leave_not_following": dict(close=OPEN, error="forbidden", where="state", note="leaving a session one does not follow"),
    "state.session_end_twice": dict(close=OPEN, error="not_found", where="state", note="ending an ended session"),
    "state.session_start_twice": dict(close=OPEN, error="conflict", where="state", note="a second own active session"),
    "state.session_accept_not_invited": dict(close=OPEN, error="forbidden", where="state", note="accepting a session one is not invited to"),
    "state.alarm_ack_cancelled": dict(close=OPEN, error="not_found", where="state", note="acking a cancelled alarm"),
    "state.alarm_cancel_twice": dict(close=OPEN, error="not_found", where="state", note="cancelling a cancelled alarm"),
    "state.alarm_cancel_not_owner": dict(close=OPEN, error="forbidden", where="state", note="a recipient cancelling someone's alarm"),
    "state.alarm_raise_non_friend": dict(close=OPEN, error="forbidden", where="state", note="alarm.raise to a non-friend"),
    "state.friend_remove_non_friend": dict(close=OPEN, error="not_found", where="state", note="removing a non-friend"),
    "state.friend_accept_without_request": dict(close=OPEN, error="not_found", where="state", note="accepting a request nobody sent"),
    "state.friend_request_self": dict(close=OPEN, error="bad_request", where="state", note="befriending yourself"),
    "state.friend_request_twice": dict(close=OPEN, error="conflict", where="state", note="asking the same user twice / already friends"),
    "state.friend_request_unknown": dict(close=OPEN, error="not_found", where="state", note="asking a user that does not exist"),
    "state.unauthenticated": dict(close=OPEN, error="unauthenticated", where="state", note="friend.list before authentication"),
    "state.hello_bad_token_5x": dict(close={1008}, error="unauthenticated", where="state", note="5 failed hello/login on one connection: each unauthenticated, then 1008"),
    "state.too_large_message": dict(close={1009}, error="too_large", where="state", note="a 70 KB text message: too_large then 1009"),
}

# Every error code the contract knows; a fuzz reply with any other code, or `internal`, fails.
CONTRACT_CODES = {"bad_request", "unsupported", "unauthenticated", "forbidden", "not_found", "conflict",
                  "rate_limited", "too_large", "internal"}
ALLOWED_FOR_ANY = CONTRACT_CODES - {"internal", "too_large"}


def markdown_table() -> str:
    def close_text(v):
        if v is OPEN:
            return "stays open"
        if isinstance(v, set):
            return " or ".join(str(c) for c in sorted(v))
        return {"http-4xx": "HTTP 4xx, closed, no 101", "no-101": "no 101", "closed": "closed",
                "closed-by-timeout": "closed by relay (handshake timeout 10 s)",
                "closed-or-open": "closed or open (memory is what is checked)", "oracle": "per rules above"}[v]

    def err_text(v):
        if v is None:
            return "—"
        if v == "any":
            return "ok or any contract code but `internal`"
        if v == "oracle":
            return "per rules above"
        return f"`{v}`"

    lines = ["| case | input | error code | close / connection |", "|---|---|---|---|"]
    for key, row in EXPECTED.items():
        lines.append(f"| `{key}` | {row['note']} | {err_text(row['error'])} | {close_text(row['close'])} |")
    return "\n".join(lines)
