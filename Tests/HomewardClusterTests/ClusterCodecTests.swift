@testable import HomewardCluster
import HomewardCore
import HomewardProtocol
import NIOCore
import Testing

/// What relays send each other.
struct ClusterCodecTests {
    @Test func aChangeNoticeRoundTrips() throws {
        let notice = ChangeNotice(node: "node-a", events: [
            .init(recipients: ["bob", "carol.x"], message: ["type": "alarm", "alarm": ["alarmId": "a_1", "text": "help"]]),
            .init(recipients: ["dave"], message: ["type": "friend.request", "from": ["username": "ann", "name": "Ann"]]),
        ], closeViewers: ["~sh_1"], revokedTokens: ["0f1e2d"])
        #expect(try ClusterCodec.decodeNotice(ClusterCodec.encode(notice)) == notice)
    }

    @Test func presenceMessagesRoundTrip() throws {
        let positions = ["ann": LastPosition(Position(lat: 57.5, lon: 11.25, acc: 8, ts: 1_763_830_000_000)), "bob": paused]
        let messages: [PresenceMessage] = [
            .delta(PresenceDelta(node: "node-b", epoch: "e1", seq: 7, joined: ["dave", "erin.x"], left: ["ann": 1_763_830_000_999])),
            .delta(PresenceDelta(node: "node-b", epoch: "e1", seq: 8)),
            .heartbeat(PresenceHeartbeat(node: "node-b", epoch: "e1", seq: 8, positions: positions)),
            .heartbeat(PresenceHeartbeat(node: "node-b", epoch: "e1", seq: 0)),
            .heartbeat(PresenceHeartbeat(node: "node-b", epoch: "e1", seq: 0, noticesPerUser: true)),
            .snapshot(PresenceSnapshot(node: "node-b", epoch: "e1", seq: 8, online: ["ann", "bob"], positions: positions)),
        ]
        for message in messages { #expect(try ClusterCodec.decodePresence(ClusterCodec.encode(message)) == message) }
    }

    @Test(arguments: ["", "not json", #"{"events": []}"#, #"{"node": "a", "events": [{"to": ["b"]}]}"#,
                      #"{"node": "a", "events": [{"to": "b", "event": {"type": "x"}}]}"#])
    func aMalformedNoticeIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeNotice(ByteBuffer(string: text)) }
    }

    /// Not JSON, a missing or bad head, a kind this relay does not know (a relay of the version that sent
    /// whole digests), a delta without its lists or with a bad time, a snapshot without its users.
    @Test(arguments: ["[]", #"{"node": "a"}"#, #"{"node": "a", "online": [], "full": true}"#,
                      #"{"kind": "delta", "node": "a", "epoch": "e", "joined": [], "left": {}}"#,
                      #"{"kind": "delta", "node": "a", "epoch": "e", "seq": -1, "joined": [], "left": {}}"#,
                      #"{"kind": "delta", "node": "a", "epoch": 5, "seq": 1, "joined": [], "left": {}}"#,
                      #"{"kind": "digest", "node": "a", "epoch": "e", "seq": 1}"#,
                      #"{"kind": "delta", "node": "a", "epoch": "e", "seq": 1, "left": {}}"#,
                      #"{"kind": "delta", "node": "a", "epoch": "e", "seq": 1, "joined": ["b", 3], "left": {}}"#,
                      #"{"kind": "delta", "node": "a", "epoch": "e", "seq": 1, "joined": [], "left": {"b": "then"}}"#,
                      #"{"kind": "snapshot", "node": "a", "epoch": "e", "seq": 1, "positions": {}}"#])
    func aMalformedPresenceMessageIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodePresence(ByteBuffer(string: text)) }
    }

    /// A heartbeat that states no mode (a relay with `--change-notices all`, or of the version before) is read as `all`.
    @Test func aHeartbeatWithoutANoticeModeIsFromARelayPublishingOnHwChangesAlone() throws {
        let payload = #"{"kind": "heartbeat", "node": "a", "epoch": "e", "seq": 1, "positions": {}}"#
        #expect(try ClusterCodec.decodePresence(ByteBuffer(string: payload)) == .heartbeat(PresenceHeartbeat(node: "a", epoch: "e", seq: 1)))
        #expect(!String(buffer: ClusterCodec.encode(.heartbeat(PresenceHeartbeat(node: "a", epoch: "e", seq: 1)))).contains("notices"),
                 "an `all` relay's heartbeat is as before")
    }

    /// The newest position was sent while paused from carol; the one before went to everyone.
    private var paused: LastPosition {
        var last = LastPosition(Position(lat: 57.1, lon: 11.1, ts: 1_763_830_000_000))
        last.record(Position(lat: 57.2, lon: 11.2, ts: 1_763_830_001_000), restriction: .allBut(["carol"]))
        return last
    }

    /// Last positions that cannot be read are left out, never taken for positions hidden from nobody: a bare
    /// position (without its restriction), an unreadable restriction, a bad position.
    @Test(arguments: [#"{"lat": 1, "lon": 2, "ts": 3}"#, #"{"position": {"lat": 1, "lon": 2, "ts": 3}, "restriction": {"except": []}}"#,
                      #"{"position": {"lat": 100, "lon": 2, "ts": 3}}"#, #"{"position": {"lat": 1, "lon": 2, "ts": 3}, "unrestricted": 5}"#])
    func heartbeatPositionsThatCannotBeReadAreLeftOut(text: String) throws {
        let payload = #"{"kind": "heartbeat", "node": "a", "epoch": "e", "seq": 1, "positions": {"ann": "# + text + "}}"
        guard case .heartbeat(let heartbeat) = try ClusterCodec.decodePresence(ByteBuffer(string: payload)) else {
            Issue.record("not a heartbeat")
            return
        }
        #expect(heartbeat.positions.isEmpty)
    }

    private func position(_ lat: Double) -> EncodedMessage {
        EncodedMessage(Event.position(from: "ann", Position(lat: lat, lon: 11.5, ts: 1_763_830_000_000)).json, positionFrom: "ann")
    }

    @Test(arguments: [nil, PositionRestriction.allBut(["bob", "carol.x"]), .only(["dave"]), .only([])])
    func aPositionRoundTripsWithItsRestriction(restriction: PositionRestriction?) throws {
        let message = position(57.25)
        let payload = ClusterCodec.encode(message, restriction: restriction)
        let (decoded, text) = try ClusterCodec.decodePosition(payload)
        #expect(decoded == restriction)
        #expect(text == message.bytes, "the event's text as its relay encoded it")
        if restriction == nil { #expect(payload == message.bytes, "a plain position is the event alone") }
    }

    /// A header that cannot be read may be a pause's: the position is refused, never delivered as plain.
    @Test(arguments: ["[\"bob\"]\n{\"type\":\"pos\"}", "{\"allBut\":[\"bob\"]}\n", "{\"allBut\":[\"bob\"]}\nnot an event",
                      "{\"except\":[\"bob\"]}\n{\"type\":\"pos\"}", "{\"only\":[\"bob\", 7]}\n{\"type\":\"pos\"}",
                      "{\"only\":\"bob\"}\n{\"type\":\"pos\"}", "{\"only\":[], \"allBut\":[]}\n{\"type\":\"pos\"}",
                      "not json\n{\"type\":\"pos\"}"])
    func aPositionWithABadHeaderIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodePosition(ByteBuffer(string: text)) }
    }

    @Test func aLastPositionRequestNamesItsAskersAndItsAnswerRoundTrips() throws {
        #expect(try ClusterCodec.decodeLastPositionRequest(ClusterCodec.encodeLastPositionRequest(for: ["bob", "share:sh_1"])) == ["bob", "share:sh_1"])
        for answer in [LastPositionAnswer(position: Position(lat: 57.5, lon: 11.25, acc: 8, ts: 1_763_830_000_000), hiddenFrom: ["bob"]),
                       LastPositionAnswer(position: nil, hiddenFrom: ["bob", "carol"]), LastPositionAnswer(position: nil),
                       LastPositionAnswer(last: paused, hiddenFrom: ["dave"])] {
            #expect(try ClusterCodec.decodeLastPositionAnswer(ClusterCodec.encode(answer)) == answer)
        }
    }

    @Test(arguments: ["", "{}", #"{"for": "bob"}"#, #"{"for": ["bob", 1]}"#])
    func aBadLastPositionRequestIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeLastPositionRequest(ByteBuffer(string: text)) }
    }

    @Test(arguments: ["null", #"{"lat": 1, "lon": 2, "ts": 3}"#, #"{"last": {}}"#, #"{"last": 5, "hidden": []}"#,
                      #"{"last": {"position": {"lat": 100, "lon": 2, "ts": 3}}, "hidden": []}"#, #"{"last": {}, "hidden": [1]}"#,
                      #"{"position": {"lat": 1, "lon": 2, "ts": 3}, "hidden": []}"#,
                      #"{"last": {"position": {"lat": 1, "lon": 2, "ts": 3}, "restriction": {"only": "bob"}}, "hidden": []}"#])
    func aBadLastPositionAnswerIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeLastPositionAnswer(ByteBuffer(string: text)) }
    }

    @Test func walkerSubjectsAreOneTokenEach() {
        #expect(ClusterSubjects.positions(of: "ann.b-c_d") == "hw.pos.ann~b-c_d")
        #expect(ClusterSubjects.positions(of: "a..b") == "hw.pos.a~~b")
        #expect(ClusterSubjects.positions(of: "ann") == "hw.pos.ann")
        #expect(ClusterSubjects.positions(of: "zoë.å") == "hw.pos.zoë~å")
        for walker in ["ann", "ann.b-c_d", "a..b", "zoë.å", ".x."] {
            #expect(ClusterSubjects.walker(in: ClusterSubjects.lastPosition(of: walker)) == walker)
        }
    }
}
