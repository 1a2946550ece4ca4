import Foundation
import HomewardProtocol
import XCTest

/// The wire model: every request, reply and event survives its own encoder and decoder, the sample
/// lists cover every type the relay knows, and every JSON example in docs/protocol.md decodes.
final class WireModelTests: XCTestCase {
    static let now: Int64 = 1_763_830_000_000
    static let alice = UserInfo(username: "alice", name: "Alice")
    static let here = Position(lat: 57.7089, lon: 11.9746, acc: 8, alt: 12.5, spd: 1.4, hdg: 220, batt: 81, ts: now)
    static let session = SessionInfo(id: "s_1", owner: alice, note: "from the station", startedAt: now,
                                     observers: ["bob"], invited: ["bob", "carol"], checkInBy: now + 60_000,
                                     destination: Destination(lat: 57.706, lon: 11.97, radius: 50), expiresAt: now + 3_600_000)
    static let alarm = AlarmInfo(id: "a_1", from: alice, text: "help at the bridge", position: here, createdAt: now,
                                 acked: ["bob"], isAutomatic: true)

    static let requests: [Request] = [
        .register(username: "alice", password: "correct horse", name: "Alice"),
        .login(username: "alice", password: "correct horse"),
        .hello(token: "t0k3n"),
        .logout, .logoutAll, .authSessions, .authRevoke(tokenId: "tk_0123456789abcdef"),
        .userBlock(username: "mallory"), .userUnblock(username: "mallory"), .userBlocks,
        .friendRequest(username: "bob"), .friendAccept(username: "bob"), .friendDecline(username: "bob"),
        .friendRemove(username: "bob"), .friendList, .userSearch(query: "bo"),
        .sessionStart(SessionOptions(invite: ["bob"], note: "home", checkInBy: now + 60_000,
                                     destination: Destination(lat: 57.706, lon: 11.97, radius: 50), ttl: 3600)),
        .sessionCheckin(sessionId: "s_1", checkInBy: now + 120_000),
        .sessionInvite(sessionId: "s_1", invite: ["carol"]), .sessionAccept(sessionId: "s_1"),
        .sessionDecline(sessionId: "s_1"), .sessionLeave(sessionId: "s_1"), .sessionEnd(sessionId: "s_1"), .sessionList,
        .position(here),
        .alarmRaise(Request.AlarmRaise(text: "help", lat: 57.7, lon: 11.9, acc: 5, to: ["bob"])),
        .alarmAck(alarmId: "a_1"), .alarmCancel(alarmId: "a_1", reason: "false alarm"),
        .alarmContacts(usernames: ["bob", "carol"]),
        .pushSubscribe(Request.PushSubscribe(endpoint: "https://push.example.net/s/1", p256dh: "BCVxsr7N", auth: "BTBZMqHH")),
        .pushUnsubscribe(subscriptionId: "p_1"), .pushList,
        .ping,
        .shareCreate(sessionId: "s_1", ttl: 3600), .shareCreate(sessionId: "s_1", ttl: nil), .shareList,
        .shareRevoke(shareId: "sh_1"), .watch(token: "t0k3n"),
        .shareAlways(with: ["bob", "carol"]), .shareAlways(with: []), .shareAlways(with: nil), .friendLocation(username: "bob"),
        .locationPause(from: nil, until: nil), .locationPause(from: "bob", until: now + 60_000),
        .locationResume(from: nil), .locationResume(from: "bob"),
        .meetPropose(MeetingProposal(to: ["bob", "carol"], lat: 57.7, lon: 11.97, name: "the fountain", time: now + 3_600_000)),
        .meetAccept(meetingId: "m_1"), .meetDecline(meetingId: "m_1"), .meetCancel(meetingId: "m_1"), .meetList,
        .msgSend(to: "bob", text: "on my way 🚶"), .msgRead(messageId: "msg_1"), .friendTrail(username: "bob"),
    ]
    static let meeting = MeetingInfo(id: "m_1", from: alice, name: "the fountain", lat: 57.7, lon: 11.97, time: now + 3_600_000,
                                     createdAt: now, invited: [MeetingInvitee(username: "bob", response: .accepted, queuedAt: now,
                                                                              deliveredAt: now + 5),
                                                               MeetingInvitee(username: "carol", queuedAt: now)])
    static let message = MessageInfo(id: "msg_1", from: "alice", to: "bob", text: "on my way", queuedAt: now, deliveredAt: now + 9)

    static let events: [Event] = [
        .position(from: "alice", here),
        .friendRequest(from: alice), .friendAdded(alice), .friendDeclined(username: "bob"), .friendRemoved(username: "bob"),
        .presence(username: "alice", online: false, lastSeen: now),
        .sessionInvite(session), .sessionAccepted(sessionId: "s_1", by: "bob"), .sessionDeclined(sessionId: "s_1", by: "bob"),
        .sessionLeft(sessionId: "s_1", by: "bob"), .sessionEnded(sessionId: "s_1", reason: "arrived"),
        .sessionLost(sessionId: "s_1", lastPosition: here, since: now), .sessionResumed(sessionId: "s_1"),
        .alarm(alarm, repeat: nil), .alarm(alarm, repeat: 3),
        .alarmAcked(alarmId: "a_1", by: "bob"), .alarmCancelled(alarmId: "a_1", reason: "false alarm"),
        .alarmAcknowledged(alarmId: "a_1", by: "bob"),
        .friendSharing(username: "alice", sharing: true), .friendSharing(username: "alice", sharing: false),
        .locationResumed(from: nil), .locationResumed(from: "bob"),
        .meet(meeting), .meetResponse(meetingId: "m_1", by: "bob", response: "accepted"), .meetCancelled(meetingId: "m_1"),
        .meetDelivered(meetingId: "m_1", to: "carol", deliveredAt: now + 7),
        .message(message), .message(MessageInfo(id: "msg_2", from: "bob", to: "alice", text: "ok", queuedAt: now)),
        .messageDelivered(messageId: "msg_1", to: "bob", deliveredAt: now + 9), .messageRead(messageId: "msg_1", by: "bob", readAt: now + 10),
    ]

    /// Through bytes, as on the wire.
    private func wire(_ value: JSONValue) throws -> JSONValue {
        try JSONParser.parse(JSONWriter.string(value))
    }

    func testEveryRequestRoundTrips() throws {
        for request in Self.requests {
            let parsed = IncomingRequest.parse(try wire(request.json(id: .int(7))), now: Self.now)
            XCTAssertEqual(parsed.id, .int(7))
            XCTAssertEqual(parsed.type, request.type)
            XCTAssertEqual(try parsed.result.get(), request, "\(request.type)")
        }
        XCTAssertEqual(Set(Self.requests.map(\.type)), Set(MessageTypes.requests), "a request type without a round trip")
    }

    func testEveryEventRoundTrips() throws {
        for event in Self.events {
            XCTAssertEqual(Event(json: try wire(event.json)), event, "\(event.type)")
        }
        let eventTypes = Set(MessageTypes.outgoing).subtracting(["ok", "error"])
        XCTAssertEqual(Set(Self.events.map(\.type)), eventTypes, "an event type without a round trip")
    }

    func testEveryReplyRoundTrips() throws {
        func check<Body: ReplyBody & Equatable>(_ body: Body, file: StaticString = #filePath, line: UInt = #line) throws {
            let reply = try wire(Message.ok(re: .string("r1"), body.fields))
            XCTAssertEqual(reply["re"], "r1", file: file, line: line)
            XCTAssertEqual(Body(json: reply), body, "\(Body.self)", file: file, line: line)
        }
        let bob = UserInfo(username: "bob", name: "bob")
        try check(SignInReply(user: Self.alice, token: "t0k3n"))
        try check(SignInReply(user: Self.alice, token: nil))
        try check(SignInReply(user: Self.alice, token: "t0k3n", features: ["share"]))
        let share = ShareInfo(id: "sh_1", sessionId: "s_1", createdAt: Self.now, expiresAt: Self.now + 7_200_000, token: "t0k3n",
                              url: "https://relay.example/f#t0k3n")
        try check(ShareCreateReply(share: share))
        try check(ShareListReply(shares: [ShareInfo(id: "sh_1", sessionId: "s_1", createdAt: Self.now, expiresAt: Self.now + 60_000)]))
        let watched = WatchedSession(id: "s_1", owner: Self.alice, startedAt: Self.now, expiresAt: Self.now + 60_000,
                                     destination: Destination(lat: 57.706, lon: 11.97, radius: 50), checkInBy: Self.now + 30_000)
        try check(WatchReply(session: watched, lastPosition: Self.here))
        try check(WatchReply(session: WatchedSession(id: "s_1", owner: Self.alice, startedAt: Self.now, expiresAt: Self.now + 1),
                             lastPosition: nil))
        try check(SignInReply(user: Self.alice, token: nil, node: "relay-b"))
        try check(SignInReply(user: Self.alice, token: nil, features: ["share", "push"], vapidPublicKey: "BP4z9KsN", node: "relay-b"))
        try check(PushSubscribeReply(subscriptionId: "p_1"))
        try check(PushListReply(subscriptions: [PushSubscriptionInfo(subscriptionId: "p_1", endpoint: "https://push.example.net/s/1", createdAt: Self.now)]))
        try check(PushListReply(subscriptions: []))
        try check(FriendshipReply(status: .requested))
        try check(FriendshipReply(status: .friends, user: bob))
        try check(FriendshipReply(status: .withdrawn))
        try check(FriendListReply(friends: [FriendInfo(user: bob, online: true, lastSeen: Self.now), FriendInfo(user: Self.alice, online: false, lastSeen: nil)],
                                  incoming: [bob], outgoing: [Self.alice]))
        try check(UserSearchReply(users: [Self.alice, bob]))
        try check(SessionReply(session: Self.session))
        try check(SessionAcceptReply(session: Self.session, position: Self.here))
        try check(SessionAcceptReply(session: Self.session, position: nil))
        try check(SessionListReply(own: Self.session, following: [Self.session], invites: []))
        try check(SessionListReply(own: nil, following: [], invites: [Self.session]))
        try check(AlarmRaiseReply(alarm: Self.alarm, recipients: [AlarmRecipient(username: "bob", online: true)]))
        try check(AlarmContactsReply(usernames: ["bob"]))
        try check(AlarmRaiseReply(alarm: Self.alarm, recipients: [], pauseOverridden: true))
        try check(LocationSharingReply(with: ["bob"], pauses: [PauseInfo(), PauseInfo(from: "carol", until: Self.now + 1)]))
        try check(LocationSharingReply(with: [], pauses: [PauseInfo()], alarmRecipients: ["bob"]))
        try check(FriendLocationReply(username: "bob", position: Self.here, age: 1500))
        try check(FriendLocationReply(username: "bob", position: nil, age: nil))
        try check(MeetingReply(meeting: Self.meeting))
        try check(MeetingListReply(meetings: [Self.meeting]))
        try check(MessageReply(message: Self.message))
        try check(DeviceSessionsReply(sessions: [
            DeviceSession(id: "tk_0123456789abcdef", createdAt: Self.now, lastUsed: Self.now + 5, expiresAt: Self.now + 99, isCurrent: true),
        ]))
    }

    /// The friends' map requests refuse what their fields may not hold, as `bad_request`.
    func testFriendsMapRequestsRefuseBadFields() throws {
        let bad: [String] = [
            #"{"type":"share.always","with":"bob"}"#, #"{"type":"share.always","with":["b"]}"#,
            #"{"type":"friend.location"}"#, #"{"type":"friend.location","username":"x y"}"#,
            #"{"type":"friend.trail"}"#, #"{"type":"friend.trail","username":7}"#,
            #"{"type":"location.pause","until":1}"#, #"{"type":"location.pause","until":"soon"}"#,
            #"{"type":"location.pause","from":5}"#, #"{"type":"location.resume","from":"no"}"#,
            #"{"type":"meet.propose","to":[],"lat":1,"lon":2,"name":"x","time":1763833600000}"#,
            #"{"type":"meet.propose","to":["bob"],"lat":91,"lon":2,"name":"x","time":1763833600000}"#,
            #"{"type":"meet.propose","to":["bob"],"lat":1,"lon":2,"name":"","time":1763833600000}"#,
            #"{"type":"meet.propose","to":["bob"],"lat":1,"lon":2,"name":"a\u202Eb","time":1763833600000}"#,
            #"{"type":"meet.propose","to":["bob"],"lat":1,"lon":2,"name":"x","time":1}"#,
            #"{"type":"meet.propose","to":["bob"],"lat":1,"lon":2,"name":"x"}"#,
            #"{"type":"meet.accept"}"#, #"{"type":"msg.read","messageId":7}"#,
            #"{"type":"msg.send","to":"bob","text":""}"#, #"{"type":"msg.send","to":"bob"}"#,
            #"{"type":"msg.send","to":"bob","text":"\u001b[31mred"}"#, #"{"type":"msg.send","to":"bob","text":"a\u2066b"}"#,
            #"{"type":"msg.send","to":"bob","text":"a\nb"}"#,
            "{\"type\":\"msg.send\",\"to\":\"bob\",\"text\":\"\(String(repeating: "é", count: 1001))\"}",
        ]
        for text in bad {
            let parsed = IncomingRequest.parse(try JSONParser.parse(text), now: Self.now)
            XCTAssertThrowsError(try parsed.result.get(), text) { error in
                XCTAssertEqual((error as? ProtocolError)?.code, .badRequest, text)
            }
        }
        let longest = "{\"type\":\"msg.send\",\"to\":\"bob\",\"text\":\"\(String(repeating: "é", count: 1000))\"}"
        XCTAssertNoThrow(try IncomingRequest.parse(try JSONParser.parse(longest), now: Self.now).result.get())
    }

    func testAnEventMissingARequiredMemberIsNotDecoded() throws {
        XCTAssertNil(Event(json: try JSONParser.parse(#"{"type":"session.accepted","sessionId":"s_1"}"#)))
        XCTAssertNil(Event(json: try JSONParser.parse(#"{"type":"pos","from":"alice","lat":1,"lon":2}"#)), "a relayed pos has a ts")
        XCTAssertNil(Event(json: try JSONParser.parse(#"{"type":"future.thing"}"#)))
    }

    /// Every example in docs/protocol.md is a request the relay accepts, an event clients decode, or a reply.
    func testEveryJSONExampleInTheProtocolDocDecodes() throws {
        let doc = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/protocol.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        var examples: [String] = []
        var inBlock = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inBlock = line.hasPrefix("```json")
                continue
            }
            if inBlock, line.hasPrefix("{") { examples.append(String(line)) }
        }
        XCTAssertGreaterThanOrEqual(examples.count, 6, "the doc's examples were not found")
        for example in examples {
            let json = try JSONParser.parse(example)
            switch json.string("type") {
            case "ok":
                XCTAssertNotNil(json["re"], example)
            case "error":
                XCTAssertNotNil(ErrorCode(rawValue: json.string("code") ?? ""), example)
            default:
                let asRequest = try? IncomingRequest.parse(json, now: Self.now).result.get()
                XCTAssertTrue(asRequest != nil || Event(json: json) != nil, "neither a request nor an event: \(example)")
            }
        }
    }
}
