import HomewardOpenSSL
import Logging
import NIOCore
import NIOSSL

/// Which TLS library terminates the relay's connections (`--tls-backend`).
public enum TLSBackend: String, Sendable, CaseIterable, LosslessStringConvertible {
    /// The system's libssl (Debian `libssl3`): Debian's security updates reach the relay on restart.
    case openssl
    /// swift-nio-ssl's BoringSSL, compiled into the binary: updated only by rebuilding the relay.
    case nioSSL = "nio-ssl"

    public init?(_ description: String) { self.init(rawValue: description) }
    public var description: String { rawValue }
}

/// The relay's TLS, set up once at start on the chosen library; gives every accepted connection its handler.
enum ServerTLS: Sendable {
    case nioSSL(NIOSSLContext)
    case openSSL(OpenSSLServerContext)

    /// - Throws: `TLSSetupError` naming the file and the problem.
    static func make(_ backend: TLSBackend, certificatePath: String, privateKeyPath: String,
                     logger: Logger) throws -> ServerTLS {
        switch backend {
        case .nioSSL:
            let configuration = try TLSFactory.serverConfiguration(certificatePath: certificatePath, privateKeyPath: privateKeyPath)
            let context = try NIOSSLContext(configuration: configuration)
            logger.info("TLS by swift-nio-ssl (BoringSSL built into this binary)")
            return .nioSSL(context)
        case .openssl:
            let context = try TLSFactory.openSSLContext(certificatePath: certificatePath, privateKeyPath: privateKeyPath)
            logger.info("TLS by the system's OpenSSL", metadata: ["library": "\(OpenSSLServerContext.libraryVersion)"])
            return .openSSL(context)
        }
    }

    /// Adds this connection's TLS handler, first in line after the socket.
    func addHandler(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        switch self {
        case .nioSSL(let context): try pipeline.addHandler(NIOSSLServerHandler(context: context))
        case .openSSL(let context): try pipeline.addHandler(OpenSSLServerHandler(context: context))
        }
    }
}
