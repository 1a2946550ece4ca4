@testable import HomewardServer
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// The handler in front of a trusted balancer's connections, on an `EmbeddedChannel`: the header decides
/// the client before anything else is set up, and a connection without a valid one is closed.
final class ProxyHeaderHandlerTests: XCTestCase {
    private var channel: EmbeddedChannel!
    /// What `proceed` was called with (the relay admits the client and adds TLS there).
    private var headers: [ProxyHeader] = []
    /// The bytes that reached the handler added by `proceed` (TLS, in the relay).
    private var passedOn: [UInt8] = []
    private var proceedFails = false
    private let clientHello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]

    override func setUp() async throws {
        headers = []
        passedOn = []
        proceedFails = false
        channel = EmbeddedChannel()
        let handler = ProxyHeaderHandler(timeout: .seconds(10), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })) {
            [unowned self] header in
            headers.append(header)
            if proceedFails { throw ConnectionRefusal.tooManyUnauthenticated(address: header.source?.ipAddress ?? "") }
            try channel.pipeline.syncOperations.addHandler(Recorder { [unowned self] in passedOn += $0 })
        }
        try channel.pipeline.syncOperations.addHandler(handler)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000))
    }

    override func tearDown() {
        _ = try? channel.finish()
        channel = nil
    }

    private func read(_ bytes: [UInt8]) throws {
        try channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    private var stillHasTheHandler: Bool {
        (try? channel.pipeline.syncOperations.handler(type: ProxyHeaderHandler.self)) != nil
    }

    func testTheHeaderComesFirstThenTheBytesAfterItGoToWhatProceedAdded() throws {
        let header = ProxyHeaderBytes.v2TCP4([192, 0, 2, 7])
        try read(Array(header.prefix(10)))
        XCTAssertEqual(headers, [], "nothing is decided on part of a header")
        try read(Array(header.dropFirst(10)) + clientHello)
        XCTAssertEqual(headers.map { $0.source?.ipAddress }, ["192.0.2.7"])
        XCTAssertEqual(passedOn, clientHello, "the client's first bytes follow the header unchanged")
        XCTAssertFalse(stillHasTheHandler, "the handler steps aside once the header is read")
        try read([0x17, 0x03])
        XCTAssertEqual(passedOn, clientHello + [0x17, 0x03])
        XCTAssertTrue(channel.isActive)
    }

    func testAHealthCheckHeaderProceedsWithoutAClientAddress() throws {
        try read(ProxyHeaderBytes.v2Local)
        XCTAssertEqual(headers, [.local])
        XCTAssertEqual(passedOn, [])
        XCTAssertTrue(channel.isActive)
    }

    func testAConnectionWithoutAHeaderIsClosedAndNothingIsPassedOn() throws {
        try read(clientHello)
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(headers, [])
        XCTAssertEqual(passedOn, [])
    }

    func testAnOversizedHeaderIsClosedBeforeItArrives() throws {
        try read(ProxyHeaderBytes.signature + [0x21, 0x11, 0xFF, 0xFF])
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(headers, [])
    }

    func testAConnectionThatSendsNoHeaderInTimeIsClosed() throws {
        try read(Array(ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]).prefix(5)))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        XCTAssertTrue(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(headers, [])
    }

    func testAClientRefusedByProceedIsClosedAndGetsNoBytesThrough() throws {
        proceedFails = true
        try read(ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]) + clientHello)
        XCTAssertEqual(headers.count, 1)
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(passedOn, [])
    }
}

/// Collects the bytes that reach it.
private final class Recorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let record: ([UInt8]) -> Void

    init(_ record: @escaping ([UInt8]) -> Void) { self.record = record }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        record(Array(unwrapInboundIn(data).readableBytesView))
    }
}
