@testable import HomewardCluster
import HomewardCore
import HomewardProtocol
import HomewardServer
import NIOCore
import Testing

/// What relays send each other, and the `--bus` values they accept.
struct ClusterCodecTests {
    @Test func aChangeNoticeRoundTrips() throws {
        let notice = ChangeNotice(node: "node-a", events: [
            .init(recipients: ["bob", "carol.x"], message: ["type": "alarm", "alarm": ["alarmId": "a_1", "text": "help"]]),
            .init(recipients: ["dave"], message: ["type": "friend.request", "from": ["username": "ann", "name": "Ann"]]),
        ], closeViewers: ["~sh_1"], revokedTokens: ["0f1e2d"])
        #expect(try ClusterCodec.decodeNotice(ClusterCodec.encode(notice)) == notice)
    }

    @Test func aPresenceDigestRoundTrips() throws {
        let digest = PresenceDigest(node: "node-b", online: ["ann", "bob"], lastSeen: ["carol": 1_763_830_000_123],
                                    positions: ["ann": Position(lat: 57.5, lon: 11.25, acc: 8, ts: 1_763_830_000_000)])
        #expect(try ClusterCodec.decodeDigest(ClusterCodec.encode(digest)) == digest)
        let change = PresenceDigest(node: "node-b", online: ["dave"], full: false, lastSeen: ["ann": 1_763_830_000_999])
        #expect(try ClusterCodec.decodeDigest(ClusterCodec.encode(change)) == change)
    }

    @Test(arguments: ["", "not json", #"{"events": []}"#, #"{"node": "a", "events": [{"to": ["b"]}]}"#,
                      #"{"node": "a", "events": [{"to": "b", "event": {"type": "x"}}]}"#])
    func aMalformedNoticeIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeNotice(ByteBuffer(string: text)) }
    }

    @Test(arguments: ["[]", #"{"node": "a"}"#, #"{"online": []}"#])
    func aMalformedDigestIsRefused(text: String) {
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeDigest(ByteBuffer(string: text)) }
    }

    @Test func walkerSubjectsAreOneTokenEach() {
        #expect(ClusterSubjects.positions(of: "ann.b-c_d") == "hw.pos.ann~b-c_d")
        #expect(ClusterSubjects.positions(of: "a..b") == "hw.pos.a~~b")
    }

    @Test func busSettingsAreParsed() throws {
        #expect(try BusSetting(parsing: "local") == .local)
        let cluster = try BusSetting(parsing: "nats://10.0.0.1:4222,10.0.0.2,nats://u:p@10.0.0.3:5222")
        guard case .nats(let servers) = cluster else { Issue.record("not nats: \(cluster)"); return }
        #expect(servers.map(\.host) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"])
        #expect(servers.map(\.port) == [4222, 4222, 5222])
        #expect(servers[2].password == "p")
        #expect(!cluster.description.contains(":p@"), "the password is not shown: \(cluster)")
    }
}
