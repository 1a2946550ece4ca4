import HomewardClient
import HomewardProtocol
import XCTest

/// Share links through the client library against a real relay: create, watch, list, revoke.
final class ShareLinkClientTests: XCTestCase {
    func testAViewerWatchesWithTheTokenUntilTheOwnerRevokesTheLink() async throws {
        let relay = try await LoopbackRelay.start()
        let walker = try relay.makeClient()
        try await walker.connect()
        let walkerName = uniqueName("walk")
        _ = try await walker.register(username: walkerName, password: "correct horse", name: "Walker")
        let session = try await walker.startSession(SessionOptions(invite: []))
        let share = try await walker.createShare(sessionId: session.id, ttl: 600)
        let token = try XCTUnwrap(share.token)
        XCTAssertEqual(share.url, "https://127.0.0.1:\(relay.port)/f#\(token)", "the listener's address by default")
        let listed = try await walker.shareLinks()
        XCTAssertEqual(listed.map(\.id), [share.id])
        XCTAssertNil(listed.first?.token, "the token is shown only once")

        let viewer = try RelayClient(configuration: try relay.clientConfiguration(reconnect: .disabled))
        try await viewer.connect()
        let events = viewer.events()
        let watched = try await viewer.watch(token: token)
        XCTAssertEqual(watched.session.id, session.id)
        XCTAssertEqual(watched.session.owner, UserInfo(username: walkerName, name: "Walker"))
        XCTAssertEqual(watched.session.expiresAt, share.expiresAt)
        do {
            _ = try await viewer.sessionList()
            XCTFail("a viewer listed sessions")
        } catch {
            XCTAssertEqual(error.code, .forbidden)
        }

        await walker.send(Position(lat: 57.7, lon: 11.97, ts: 1_763_830_000_000))
        let position = try await events.first("pos") { event -> Position? in
            if case .event(.position(_, let position)) = event.kind { return position }
            return nil
        }
        XCTAssertEqual(position.lat, 57.7)

        try await walker.revokeShare(share.id)
        let reason = try await events.first("session.ended") { event -> String? in
            if case .event(.sessionEnded(_, let reason)) = event.kind { return reason }
            return nil
        }
        XCTAssertEqual(reason, "revoked")
        let afterRevoke = try await walker.shareLinks()
        XCTAssertEqual(afterRevoke, [])

        await viewer.close()
        await walker.close()
        await relay.stop()
    }
}
