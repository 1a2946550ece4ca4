import Foundation
import HomewardOpenSSL
import HomewardServer
import NIOCore
import NIOEmbedded
import NIOSSL
import NIOTLS
import XCTest

/// What reached the top of a pipeline: plaintext, TLS events, errors.
final class Recorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var received = ByteBuffer()
    var events: [TLSUserEvent] = []
    var errors: [any Error] = []
    var inactive = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent { events.append(event) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    func channelInactive(context: ChannelHandlerContext) { inactive = true }

    var text: String { String(buffer: received) }
}

/// A development CA and server certificate, made once for the whole test run.
enum TestCertificates {
    static let shared: DevCertificates = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-openssl-tests-\(getpid())")
        return try! DevCertificates.ensure(in: directory)
    }()

    static let serverContext: OpenSSLServerContext = try! OpenSSLServerContext(
        certificateChainPath: shared.certificatePath, privateKeyPath: shared.privateKeyPath)

    static func clientContext(minimum: TLSVersion = .tlsv12, maximum: TLSVersion? = nil,
                              alpn: [String] = ["http/1.1"]) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(shared.caPath)
        configuration.minimumTLSVersion = minimum
        configuration.maximumTLSVersion = maximum
        configuration.applicationProtocols = alpn
        return try NIOSSLContext(configuration: configuration)
    }
}

/// A server channel with `OpenSSLServerHandler` and a client channel with swift-nio-ssl's client handler,
/// both embedded, with the bytes between them carried by hand (`exchange`), so that a test can also cut,
/// drop or replace them.
final class TLSPair {
    let server = EmbeddedChannel()
    let client = EmbeddedChannel()
    let serverHandler: OpenSSLServerHandler
    let serverSide = Recorder()
    let clientSide = Recorder()

    init(client clientContext: NIOSSLContext? = nil, serverName: String? = "localhost",
         closeTimeout: TimeAmount = .seconds(5)) throws {
        serverHandler = OpenSSLServerHandler(context: TestCertificates.serverContext, closeTimeout: closeTimeout)
        try server.pipeline.syncOperations.addHandlers(serverHandler, serverSide)
        let context = try clientContext ?? TestCertificates.clientContext()
        try client.pipeline.syncOperations.addHandlers(
            try NIOSSLClientHandler(context: context, serverHostname: serverName), clientSide)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        try server.connect(to: address).wait()
        try client.connect(to: address).wait()
    }

    /// Moves bytes both ways until neither side has anything more to send.
    func exchange(chunkSize: Int? = nil) throws {
        var moved = true
        while moved {
            moved = false
            while let bytes = try client.readOutbound(as: ByteBuffer.self) {
                moved = true
                try deliver(bytes, to: server, chunkSize: chunkSize)
            }
            while let bytes = try server.readOutbound(as: ByteBuffer.self) {
                moved = true
                try deliver(bytes, to: client, chunkSize: chunkSize)
            }
        }
    }

    /// Everything the server has sent and not yet delivered.
    func takeServerOutput() throws -> ByteBuffer {
        var all = ByteBuffer()
        while var bytes = try server.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&bytes) }
        return all
    }

    private func deliver(_ bytes: ByteBuffer, to channel: EmbeddedChannel, chunkSize: Int?) throws {
        guard channel.isActive else { return }
        guard let chunkSize else {
            try channel.writeInbound(bytes)
            return
        }
        var rest = bytes
        while rest.readableBytes > 0, channel.isActive, let chunk = rest.readSlice(length: min(chunkSize, rest.readableBytes)) {
            try channel.writeInbound(chunk)
        }
    }

    func handshake() throws {
        try exchange()
        XCTAssertEqual(serverHandler.state, .open)
    }
}
