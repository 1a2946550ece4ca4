import HomewardOpenSSL
import NIOCore
import NIOEmbedded
import NIOSSL
import NIOTLS
import XCTest

/// The OpenSSL server handler against swift-nio-ssl's client, byte by byte, with no sockets.
final class OpenSSLServerHandlerTests: XCTestCase {
    func testHandshakeOnTLS13NegotiatesHTTP11AndSeesTheServerName() throws {
        let pair = try TLSPair()
        try pair.handshake()
        XCTAssertEqual(pair.serverHandler.protocolVersion, "TLSv1.3")
        XCTAssertEqual(pair.serverHandler.serverName, "localhost")
        XCTAssertEqual(pair.serverSide.events, [.handshakeCompleted(negotiatedProtocol: "http/1.1")])
        XCTAssertEqual(pair.clientSide.events, [.handshakeCompleted(negotiatedProtocol: "http/1.1")])
    }

    func testHandshakeOnTLS12() throws {
        let pair = try TLSPair(client: TestCertificates.clientContext(maximum: .tlsv12))
        try pair.handshake()
        XCTAssertEqual(pair.serverHandler.protocolVersion, "TLSv1.2")
        XCTAssertEqual(pair.clientSide.events, [.handshakeCompleted(negotiatedProtocol: "http/1.1")])
    }

    func testAClientWithoutALPNOrServerNameStillConnects() throws {
        // Without a server name the client cannot check the certificate's name, so it checks nothing.
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        let pair = try TLSPair(client: NIOSSLContext(configuration: configuration), serverName: nil)
        try pair.handshake()
        XCTAssertNil(pair.serverHandler.serverName)
        XCTAssertEqual(pair.serverSide.events, [.handshakeCompleted(negotiatedProtocol: nil)])
    }

    func testAClientOfferingOnlyTLS11IsRefused() throws {
        let pair = try TLSPair(client: TestCertificates.clientContext(minimum: .tlsv1, maximum: .tlsv11))
        try pair.exchange()
        XCTAssertEqual(pair.serverHandler.state, .closed)
        XCTAssertFalse(pair.server.isActive)
        XCTAssertTrue(pair.serverSide.errors.contains { if case TLSConnectionError.handshakeFailed = $0 { true } else { false } },
                      "\(pair.serverSide.errors)")
        XCTAssertTrue(pair.serverSide.events.isEmpty)
    }

    func testPlaintextTravelsBothWays() throws {
        let pair = try TLSPair()
        try pair.handshake()
        try pair.client.writeAndFlush(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n")).wait()
        try pair.exchange()
        XCTAssertEqual(pair.serverSide.text, "GET / HTTP/1.1\r\n\r\n")
        let written = pair.server.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"))
        try pair.exchange()
        XCTAssertNoThrow(try written.wait())
        XCTAssertEqual(pair.clientSide.text, "HTTP/1.1 200 OK\r\n\r\n")
    }

    func testALargeMessageSpanningManyRecordsArrivesWhole() throws {
        let pair = try TLSPair()
        try pair.handshake()
        let large = String(repeating: "0123456789abcdef", count: 10_000)  // 160 KB: ten 16 KB records
        try pair.client.writeAndFlush(ByteBuffer(string: large)).wait()
        try pair.exchange()
        XCTAssertEqual(pair.serverSide.text, large)
        pair.server.writeAndFlush(ByteBuffer(string: large), promise: nil)
        try pair.exchange()
        XCTAssertEqual(pair.clientSide.text, large)
    }

    func testRecordsCutIntoSingleBytesStillMakeAHandshakeAndData() throws {
        let pair = try TLSPair()
        try pair.exchange(chunkSize: 1)
        XCTAssertEqual(pair.serverHandler.state, .open)
        try pair.client.writeAndFlush(ByteBuffer(string: "partial records")).wait()
        try pair.exchange(chunkSize: 1)
        XCTAssertEqual(pair.serverSide.text, "partial records")
    }

    func testWritesBeforeTheHandshakeCompletesGoOutOnceItDoes() throws {
        let pair = try TLSPair()
        let early = pair.server.writeAndFlush(ByteBuffer(string: "early"))
        XCTAssertNil(try pair.server.readOutbound(as: ByteBuffer.self), "nothing before the ClientHello")
        try pair.handshake()
        XCTAssertNoThrow(try early.wait())
        XCTAssertEqual(pair.clientSide.text, "early")
    }

    func testGarbageInsteadOfAClientHelloFailsTheHandshakeAndCloses() throws {
        let server = EmbeddedChannel()
        let handler = OpenSSLServerHandler(context: TestCertificates.serverContext)
        let top = Recorder()
        try server.pipeline.syncOperations.addHandlers(handler, top)
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let held = server.write(ByteBuffer(string: "never sent"))
        try server.writeInbound(ByteBuffer(string: "GET /v1/ws HTTP/1.1\r\nHost: localhost\r\n\r\n"))
        XCTAssertEqual(handler.state, .closed)
        XCTAssertFalse(server.isActive)
        guard case TLSConnectionError.handshakeFailed(let reason)? = top.errors.first else {
            return XCTFail("expected a handshake failure, got \(top.errors)")
        }
        XCTAssertFalse(reason.isEmpty)
        XCTAssertEqual(top.received.readableBytes, 0, "no plaintext passed up")
        XCTAssertThrowsError(try held.wait())
        // What comes after is dropped, not parsed.
        XCTAssertNoThrow(try server.writeInbound(ByteBuffer(string: "more garbage")))
        XCTAssertEqual(top.errors.count, 1)
    }

    func testAPeerClosingMidHandshakeFailsHeldWritesAndReportsIt() throws {
        let pair = try TLSPair()
        guard let clientHello = try pair.client.readOutbound(as: ByteBuffer.self) else { return XCTFail("no ClientHello") }
        try pair.server.writeInbound(clientHello)
        XCTAssertEqual(pair.serverHandler.state, .handshaking)
        let held = pair.server.writeAndFlush(ByteBuffer(string: "never sent"))
        pair.server.pipeline.fireChannelInactive()
        XCTAssertEqual(pair.serverHandler.state, .closed)
        XCTAssertThrowsError(try held.wait())
        XCTAssertEqual(pair.serverSide.errors.first as? TLSConnectionError, .closedDuringHandshake)
        XCTAssertTrue(pair.serverSide.inactive)
        XCTAssertTrue(pair.serverSide.events.isEmpty)
    }

    func testThePeersCloseNotifyWithWritesPendingSendsThemThenAnswersAndCloses() throws {
        let pair = try TLSPair()
        try pair.handshake()
        let pending = pair.server.write(ByteBuffer(string: "last words"))  // written, not flushed
        let clientClosed = pair.client.close()
        try pair.exchange()
        XCTAssertNoThrow(try pending.wait(), "the pending write went out")
        XCTAssertEqual(pair.clientSide.text, "last words")
        XCTAssertEqual(pair.serverHandler.state, .closed)
        XCTAssertFalse(pair.server.isActive)
        XCTAssertNoThrow(try clientClosed.wait(), "the client got our close_notify")
        XCTAssertTrue(pair.serverSide.errors.isEmpty, "\(pair.serverSide.errors)")
    }

    func testClosingSendsCloseNotifyAndClosesOnThePeersAnswer() throws {
        let pair = try TLSPair()
        try pair.handshake()
        pair.server.write(ByteBuffer(string: "goodbye"), promise: nil)
        let closed = pair.server.close()
        XCTAssertEqual(pair.serverHandler.state, .closing)
        XCTAssertTrue(pair.server.isActive, "waits for the peer's close_notify")
        try pair.exchange()
        XCTAssertEqual(pair.clientSide.text, "goodbye")
        XCTAssertNoThrow(try closed.wait())
        XCTAssertFalse(pair.server.isActive)
        XCTAssertEqual(pair.serverHandler.state, .closed)
    }

    func testClosingClosesAnywayWhenThePeerNeverAnswers() throws {
        let pair = try TLSPair(closeTimeout: .seconds(2))
        try pair.handshake()
        let closed = pair.server.close()
        _ = try pair.takeServerOutput()  // the close_notify is lost
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(1))
        XCTAssertTrue(pair.server.isActive)
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(1))
        XCTAssertNoThrow(try closed.wait())
        XCTAssertFalse(pair.server.isActive)
    }

    func testWritesAfterCloseFail() throws {
        let pair = try TLSPair()
        try pair.handshake()
        _ = pair.server.close()
        XCTAssertThrowsError(try pair.server.writeAndFlush(ByteBuffer(string: "too late")).wait()) { error in
            XCTAssertEqual(error as? TLSConnectionError, .closed)
        }
    }

    func testADroppedTCPConnectionAfterTheHandshakeIsAnUncleanShutdown() throws {
        let pair = try TLSPair()
        try pair.handshake()
        pair.server.pipeline.fireChannelInactive()
        XCTAssertEqual(pair.serverSide.errors.first as? TLSConnectionError, .uncleanShutdown)
        XCTAssertEqual(pair.serverHandler.state, .closed)
    }

    func testACorruptedRecordAfterTheHandshakeFailsTheConnection() throws {
        let pair = try TLSPair()
        try pair.handshake()
        try pair.client.writeAndFlush(ByteBuffer(string: "secret")).wait()
        guard var record = try pair.client.readOutbound(as: ByteBuffer.self) else { return XCTFail("no record") }
        let last = record.writerIndex - 1
        record.setInteger(record.getInteger(at: last, as: UInt8.self)! ^ 0xff, at: last)
        try pair.server.writeInbound(record)
        XCTAssertEqual(pair.serverHandler.state, .closed)
        XCTAssertFalse(pair.server.isActive)
        XCTAssertEqual(pair.serverSide.received.readableBytes, 0)
        guard case TLSConnectionError.protocolViolation? = pair.serverSide.errors.first else {
            return XCTFail("expected a protocol violation, got \(pair.serverSide.errors)")
        }
    }
}
