import NIOSSL

/// Which relay certificates the client accepts.
public enum TLSTrust: Sendable, Equatable {
    /// The operating system's trust store: for a relay with a publicly trusted certificate.
    case system
    /// Only certificates issued by the CA(s) in this PEM file, such as the relay's development CA.
    case caFile(String)
    /// Any certificate, without checking the host name. Only when the user explicitly asks
    /// (`--insecure`): it gives encryption without knowing who is on the other end.
    case insecure

    /// The failure to set up TLS, e.g. an unreadable CA file.
    public struct SetupError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    func makeContext() throws(SetupError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        switch self {
        case .system:
            break
        case .caFile(let path):
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(path)
                guard !certificates.isEmpty else { throw SetupError(description: "no certificate in \(path)") }
                configuration.trustRoots = .certificates(certificates)
            } catch let error as SetupError {
                throw error
            } catch {
                throw SetupError(description: "cannot read CA file \(path): \(error)")
            }
        case .insecure:
            configuration.certificateVerification = .none
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw SetupError(description: "cannot set up TLS: \(error)")
        }
    }
}
