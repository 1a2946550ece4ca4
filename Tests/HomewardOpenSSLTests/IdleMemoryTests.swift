import CHomewardOpenSSL
@testable import HomewardOpenSSL
import NIOCore
import XCTest

/// An open, idle session holds no buffer: not OpenSSL's 16 KiB record buffers, not the memory BIOs'.
/// That is most of the difference between an idle connection's few KiB and a busy one's tens.
final class IdleMemoryTests: XCTestCase {
    func testAnIdleSessionAfterTrafficHoldsNoRecordBuffers() throws {
        let pair = try TLSPair()
        try pair.handshake()
        try pair.client.writeAndFlush(ByteBuffer(string: "GET /v1/ws HTTP/1.1\r\n\r\n")).wait()
        try pair.exchange()
        let written = pair.server.writeAndFlush(ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\n\r\n"))
        try pair.exchange()
        try written.wait()
        let session = try XCTUnwrap(pair.serverHandler.session)
        assertHoldsNoRecordBuffers(session)
    }

    func testAnIdleSessionAfterTheHandshakeHoldsNoRecordBuffers() throws {
        let pair = try TLSPair()
        try pair.handshake()
        let session = try XCTUnwrap(pair.serverHandler.session)
        assertHoldsNoRecordBuffers(session)
    }

    func testASessionClosedByThePeerHoldsNoWriteBuffer() throws {
        let pair = try TLSPair()
        try pair.handshake()
        let session = try XCTUnwrap(pair.serverHandler.session)
        pair.client.close(promise: nil)
        try pair.exchange()
        XCTAssertEqual(pair.serverHandler.state, .closed)
        let before = homeward_heap_bytes_in_use()
        session.freeRecordBuffers()
        let freed = Int(before) - Int(homeward_heap_bytes_in_use())
        XCTAssertLessThan(freed, 1024, "the closed session still held \(freed) bytes of record buffers")
    }

    /// Frees what an idle session may release and checks nothing was left to free: under 1 KiB of record
    /// buffers, and empty BIO buffers. The EmbeddedChannels run on this thread, so their allocations are in
    /// the arena measured.
    private func assertHoldsNoRecordBuffers(_ session: OpenSSLConnection, file: StaticString = #filePath,
                                            line: UInt = #line) {
        let before = homeward_heap_bytes_in_use()
        session.freeRecordBuffers()
        let freed = Int(before) - Int(homeward_heap_bytes_in_use())
        XCTAssertLessThan(freed, 1024, "an idle session still held \(freed) bytes of record buffers", file: file, line: line)
        XCTAssertEqual(session.bioCapacity, 0, file: file, line: line)
    }
}
