@testable import HomewardCluster
import HomewardCore
import HomewardProtocol
import NIOCore
import Testing

/// The walker's relay's trail in its answer to `hw.last`: every point with the restriction it was sent under,
/// so the asking relay shows each asker what the walker's relay would.
struct TrailCodecTests {
    private let now: Int64 = 1_763_830_000_000

    @Test func aLastPositionAnswerWithATrailRoundTripsWithEachPointsRestriction() throws {
        var trail = SessionTrail(sessionId: "s_1", since: now)
        trail.record(Position(lat: 57.1, lon: 11.1, ts: now + 1), restriction: nil, now: now + 1)
        trail.record(Position(lat: 57.2, lon: 11.1, ts: now + 2), restriction: .allBut(["bob"]), now: now + 2)
        trail.record(Position(lat: 57.3, lon: 11.1, ts: now + 3), restriction: .allBut(["bob"]), now: now + 3)
        trail.record(Position(lat: 57.4, lon: 11.1, ts: now + 4), restriction: .only(["dave"]), now: now + 4)
        var answer = LastPositionAnswer(position: Position(lat: 57.4, lon: 11.1, ts: now + 4))
        answer.trail = trail
        let decoded = try ClusterCodec.decodeLastPositionAnswer(ClusterCodec.encode(answer))
        #expect(decoded == answer)
        #expect(decoded.trail?.points(shownTo: ["bob"], now: now + 5).map(\.lat) == [57.1])
        #expect(decoded.trail?.points(shownTo: ["dave"], now: now + 5).map(\.lat) == [57.1, 57.2, 57.3, 57.4])
    }

    @Test(arguments: [#"{"sessionId": "s_1", "since": 1}"#, #"{"sessionId": "s_1", "since": 1, "runs": [{"points": [[1, 2, 3]]}]}"#,
                      #"{"sessionId": "s_1", "since": 1, "runs": [{"points": [[91, 2, 3, 4]]}]}"#,
                      #"{"sessionId": "s_1", "since": 1, "runs": [{"restriction": {"except": []}, "points": []}]}"#])
    func aBadTrailInAnAnswerIsRefused(trail: String) {
        let text = #"{"last": {}, "hidden": [], "trail": "# + trail + "}"
        #expect(throws: ClusterCodec.DecodingError.self) { try ClusterCodec.decodeLastPositionAnswer(ByteBuffer(string: text)) }
    }
}
