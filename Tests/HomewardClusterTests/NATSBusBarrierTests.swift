import Foundation
@testable import HomewardCluster
import HomewardCore
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import Synchronization
import XCTest

/// `NATSBus.barrier`: once it returns, every change notice another client published and had nats-server
/// confirm before it is with the relay, however slowly the relay takes them.
final class NATSBusBarrierTests: XCTestCase {
    private func connect(_ server: NATSServerProcess) async throws -> NATSBus {
        try await NATSBus.connect(servers: [NATSServerAddress(host: "127.0.0.1", port: server.port)], node: "here",
                                  logger: Logger(label: "test"))
    }

    func testABarrierReturnsOnceEveryNoticeConfirmedBeforeItWasHandedOver() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let bus = try await connect(server)
        let receiver = TokenReceiver(delay: 2000)
        try await bus.start(delivering: receiver)
        let other = try await NATSClient.connect(urls: [server.url])
        for index in 0..<40 {
            try await other.publish(subject: "hw.changes", payload: ClusterCodec.encode(ChangeNotice(node: "there", revokedTokens: ["\(index)"])))
        }
        try await other.flush()
        let generation = await bus.barrier()
        XCTAssertEqual(generation, 0, "the first connection")
        XCTAssertEqual(receiver.tokens, (0..<40).map(String.init), "every notice, in order, before the barrier returned")
        await other.close()
        await bus.stop()
    }

    func testABarrierConfirmsNothingBeforeStartOrWithoutTheServerAndCountsReconnects() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let bus = try await connect(server)
        let nothing = await bus.barrier()
        XCTAssertNil(nothing, "not subscribed to notices yet")
        XCTAssertNil(bus.generation)
        let receiver = TokenReceiver(delay: 2000)
        try await bus.start(delivering: receiver)
        XCTAssertEqual(bus.generation, 0)

        try await server.restart()
        let deadline = ContinuousClock.now + .seconds(10)
        var generation = await bus.barrier()
        while generation != 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            generation = await bus.barrier()
        }
        XCTAssertEqual(generation, 1, "a connection that came back is another one: notices were lost meanwhile")

        server.stop()
        let start = ContinuousClock.now
        let down = await bus.barrier()
        XCTAssertNil(down)
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(500), "no answer soon: the relay asks the store instead")
        await bus.stop()
    }
}
