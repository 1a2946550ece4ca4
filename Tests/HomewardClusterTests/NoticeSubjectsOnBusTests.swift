import Foundation
@testable import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import Synchronization
import XCTest

/// Change notices on users' and timer shards' subjects, on a real nats-server: a bus that follows some users hears
/// every notice addressed to them, once however many of its subjects a notice came on, and nothing else.
final class NoticeSubjectsOnBusTests: XCTestCase {
    private func connect(_ server: NATSServerProcess, node: String, readsEveryNotice: Bool,
                         metrics: RecordingMetrics = RecordingMetrics()) async throws -> NATSBus {
        try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: node,
                                  logger: Logger(label: "test"), readsEveryNotice: readsEveryNotice, metrics: metrics)
    }

    private func notice(_ token: String, users: Set<String> = [], timerOwners: Set<String> = []) -> ChangeNotice {
        ChangeNotice(node: "there", revokedTokens: [token], address: NoticeAddress(users: users, timerOwners: timerOwners))
    }

    func testABusFollowingSomeUsersHearsEachNoticeAboutThemOnceAndNoneAboutOthers() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let written = RecordingMetrics(), read = RecordingMetrics()
        let writer = try await connect(server, node: "there", readsEveryNotice: true, metrics: written)
        try await writer.start(delivering: TokenReceiver())
        let reader = try await connect(server, node: "here", readsEveryNotice: false, metrics: read)
        let heard = TokenReceiver()
        try await reader.start(delivering: heard)
        let whole = try await connect(server, node: "whole", readsEveryNotice: true)
        let everything = TokenReceiver()
        try await whole.start(delivering: everything)

        await reader.follow(users: ["bob", "cat.x"], unfollowing: [])
        var shards = TimerShards.none
        shards.insert(TimerShards.shard(of: "tim"))
        await reader.followTimerShards(taking: shards, releasing: .none)
        let stranger = ["dan", "eve", "fay", "gus"].first { TimerShards.shard(of: $0) != TimerShards.shard(of: "tim") }!
        writer.publishChanges(notice("1", users: ["bob", "cat.x", "dan"]))
        writer.publishChanges(notice("2", users: [stranger]))
        writer.publishChanges(notice("3", users: ["cat.x"], timerOwners: ["tim"]))
        writer.publishChanges(notice("4", timerOwners: [stranger]))
        writer.publishChanges(notice("5"))
        await writer.flush()
        var generation = await reader.barrier()
        XCTAssertEqual(generation, 0)
        XCTAssertEqual(heard.tokens, ["1", "3"], "each notice about a followed user or shard once, in order; none about others")
        XCTAssertEqual(read.gauge("homeward_bus_followed_subjects"), 3)
        XCTAssertEqual(read.counter("homeward_bus_notices_received_total"), 4, "two subjects each")
        XCTAssertEqual(read.counter("homeward_bus_notice_copies_dropped_total"), 2)

        await reader.follow(users: [], unfollowing: ["cat.x"])
        await reader.followTimerShards(taking: .none, releasing: shards)
        writer.publishChanges(notice("6", users: ["cat.x"], timerOwners: ["tim"]))
        writer.publishChanges(notice("7", users: ["bob"]))
        await writer.flush()
        generation = await reader.barrier()
        XCTAssertEqual(generation, 0)
        XCTAssertEqual(heard.tokens, ["1", "3", "7"], "nothing more about a user nor a shard no longer followed")
        XCTAssertEqual(read.gauge("homeward_bus_followed_subjects"), 1)
        XCTAssertEqual(read.counter("homeward_bus_notices_received_total"), 5)
        XCTAssertEqual(read.counter("homeward_bus_notice_copies_dropped_total"), 2)
        // hw.changes for each, plus one per user and timer shard: 4 + 2 + 3 + 2 + 1 + 3 + 2.
        XCTAssertEqual(written.counter("homeward_bus_notice_messages_published_total"), 17)

        _ = await whole.barrier()
        XCTAssertEqual(everything.tokens, ["1", "2", "3", "4", "5", "6", "7"], "a whole cache hears every notice on hw.changes")
        await writer.stop()
        await reader.stop()
        await whole.stop()
    }

    func testABarrierWaitsForNoticesOnFollowedSubjects() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let reader = try await connect(server, node: "here", readsEveryNotice: false)
        let heard = TokenReceiver(delay: 2000)
        try await reader.start(delivering: heard)
        await reader.follow(users: ["bob", "cat"], unfollowing: [])
        let other = try await NATSClient.connect(urls: [server.url])
        for index in 0..<30 {
            let payload = NoticeStamp(node: "there", epoch: "e", number: UInt64(index + 1))
                .stamped(ClusterCodec.encode(ChangeNotice(node: "there", revokedTokens: ["\(index)"])))
            // Each notice on both subjects: the copy is dropped, and counted as handed over.
            try await other.publish(subject: "hw.changes.bob", payload: payload)
            try await other.publish(subject: "hw.changes.cat", payload: payload)
        }
        try await other.flush()
        let generation = await reader.barrier()
        XCTAssertEqual(generation, 0)
        XCTAssertEqual(heard.tokens, (0..<30).map(String.init), "every notice once, in order, before the barrier returned")
        await other.close()
        await reader.stop()
    }
}
