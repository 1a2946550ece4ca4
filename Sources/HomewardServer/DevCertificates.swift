import Crypto
import Foundation
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A local development CA and a `localhost` server certificate signed by it, kept in one directory.
///
/// `ensure(in:)` makes them on first use and reuses them afterwards, so clients that trust `dev-ca.pem`
/// once keep working across restarts:
/// - `dev-ca.pem`, `dev-ca-key.pem` (0600): the CA (EC P-256, 10 years).
/// - `server.pem` (the leaf, then the CA), `server-key.pem` (0600): the server certificate (EC P-256,
///   825 days) for DNS `localhost`, IP `127.0.0.1` and IP `::1`.
///
/// A server certificate that expires within 30 days, does not match its key, or was not issued by the
/// current CA is issued again with the same CA. A CA that is missing, unreadable, does not match its
/// key or expires within 30 days is replaced, together with the server certificate; clients then
/// have to trust the new `dev-ca.pem`.
///
/// Files are written to a temporary file in the same directory and renamed into place, so a reader
/// never sees half a file. Two processes calling `ensure` on the same empty directory at the same time
/// may both issue certificates; it is meant for a single development relay.
public struct DevCertificates: Sendable {
    public static let caFileName = "dev-ca.pem"
    public static let caKeyFileName = "dev-ca-key.pem"
    public static let certificateFileName = "server.pem"
    public static let privateKeyFileName = "server-key.pem"

    /// How long before expiry a certificate is replaced.
    public static let renewalWindow: TimeInterval = 30 * 86_400
    static let caLifetime: TimeInterval = 3_650 * 86_400
    static let serverLifetime: TimeInterval = 825 * 86_400
    /// Certificates are back-dated this much so that a client whose clock is slightly behind accepts them.
    static let backdating: TimeInterval = 3_600

    public let directory: URL
    /// True when this call wrote anything: a new server certificate, and possibly a new CA.
    public let created: Bool
    /// True when this call made a new CA (clients must trust the new `caPath`).
    public let createdAuthority: Bool

    /// The CA certificate (PEM) clients must trust.
    public var caPath: String { directory.appendingPathComponent(Self.caFileName).path }
    /// The CA private key (PEM, mode 0600).
    public var caKeyPath: String { directory.appendingPathComponent(Self.caKeyFileName).path }
    /// The server certificate chain (PEM: leaf, then CA).
    public var certificatePath: String { directory.appendingPathComponent(Self.certificateFileName).path }
    /// The server private key (PEM, mode 0600).
    public var privateKeyPath: String { directory.appendingPathComponent(Self.privateKeyFileName).path }

    init(directory: URL, created: Bool, createdAuthority: Bool) {
        self.directory = directory
        self.created = created
        self.createdAuthority = createdAuthority
    }

    /// Makes sure a usable CA and server certificate exist in `directory` (created with mode 0700 if
    /// missing), creating or renewing whatever is missing, corrupt or about to expire.
    ///
    /// - Parameter now: the current time; only tests pass another.
    /// - Throws: `TLSSetupError` when the directory or a file cannot be written.
    public static func ensure(in directory: URL, now: Date = Date()) throws -> DevCertificates {
        let paths = DevCertificates(directory: directory, created: false, createdAuthority: false)
        try createDirectoryIfMissing(directory)

        var createdAuthority = false
        let authority: Authority
        if let existing = Authority.load(certificatePath: paths.caPath, keyPath: paths.caKeyPath, now: now) {
            authority = existing
            // A reused key stays private even if something loosened its mode.
            tightenPermissions(of: paths.caKeyPath)
        } else {
            authority = try Authority.make(now: now)
            try writeAtomically(authority.key.pemRepresentation, to: paths.caKeyPath, permissions: 0o600)
            try writeAtomically(authority.certificatePEM, to: paths.caPath, permissions: 0o644)
            createdAuthority = true
        }

        var created = createdAuthority
        if createdAuthority
            || !serverCertificateIsUsable(
                certificatePath: paths.certificatePath, keyPath: paths.privateKeyPath, authority: authority, now: now)
        {
            let key = P256.Signing.PrivateKey()
            let leaf = try makeServerCertificate(key: key, authority: authority, now: now)
            let leafPEM = try pem(of: leaf, purpose: "the server certificate")
            // Key first: if we stop between the two, the next call sees a mismatch and issues again.
            try writeAtomically(key.pemRepresentation, to: paths.privateKeyPath, permissions: 0o600)
            try writeAtomically(leafPEM + authority.certificatePEM, to: paths.certificatePath, permissions: 0o644)
            created = true
        } else {
            tightenPermissions(of: paths.privateKeyPath)
        }
        return DevCertificates(directory: directory, created: created, createdAuthority: createdAuthority)
    }

    // MARK: - The CA

    struct Authority {
        let certificate: Certificate
        let certificatePEM: String
        let key: P256.Signing.PrivateKey

        /// The CA from disk, or nil when it is missing, corrupt, not a CA, not matching its key, or expiring.
        static func load(certificatePath: String, keyPath: String, now: Date) -> Authority? {
            guard let certificateText = readText(certificatePath), let keyText = readText(keyPath),
                let certificate = try? Certificate(pemEncoded: certificateText),
                let key = try? P256.Signing.PrivateKey(pemRepresentation: keyText),
                certificate.publicKey == Certificate.PublicKey(key.publicKey),
                case .isCertificateAuthority? = try? certificate.extensions.basicConstraints,
                certificate.notValidAfter > now.addingTimeInterval(DevCertificates.renewalWindow)
            else { return nil }
            // Re-serialize rather than keep the file's text, so `server.pem` always gets exactly one clean block.
            guard let pemText = try? DevCertificates.pem(of: certificate, purpose: "the CA") else { return nil }
            return Authority(certificate: certificate, certificatePEM: pemText, key: key)
        }

        static func make(now: Date) throws -> Authority {
            let key = P256.Signing.PrivateKey()
            let publicKey = Certificate.PublicKey(key.publicKey)
            let name = try DistinguishedName {
                OrganizationName("Homeward")
                CommonName(DevCertificates.authorityCommonName())
            }
            let certificate: Certificate
            do {
                let extensions = try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: publicKey)
                }
                certificate = try Certificate(
                    version: .v3,
                    serialNumber: Certificate.SerialNumber(),
                    publicKey: publicKey,
                    notValidBefore: now.addingTimeInterval(-DevCertificates.backdating),
                    notValidAfter: now.addingTimeInterval(DevCertificates.caLifetime),
                    issuer: name,
                    subject: name,
                    signatureAlgorithm: .ecdsaWithSHA256,
                    extensions: extensions,
                    issuerPrivateKey: Certificate.PrivateKey(key)
                )
            } catch {
                throw TLSSetupError.certificateGenerationFailed(what: "the development CA", reason: "\(error)")
            }
            return Authority(
                certificate: certificate, certificatePEM: try DevCertificates.pem(of: certificate, purpose: "the CA"),
                key: key)
        }

        /// The key identifier leaves name in their authorityKeyIdentifier.
        var keyIdentifier: ArraySlice<UInt8> {
            if let identifier = try? certificate.extensions.subjectKeyIdentifier {
                return identifier.keyIdentifier
            }
            return SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier
        }
    }

    /// "Homeward development CA (<hostname>)", kept within the 64 characters X.520 allows for a common name.
    static func authorityCommonName() -> String {
        let prefix = "Homeward development CA"
        let host = ProcessInfo.processInfo.hostName.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !host.isEmpty else { return prefix }
        let room = 64 - prefix.count - 3
        return "\(prefix) (\(host.prefix(room)))"
    }

    // MARK: - The server certificate

    /// The names the server certificate covers.
    static let serverNames: [GeneralName] = [
        .dnsName("localhost"),
        .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
        .ipAddress(ASN1OctetString(contentBytes: ArraySlice(Array(repeating: 0, count: 15) + [1]))),
    ]

    static func makeServerCertificate(
        key: P256.Signing.PrivateKey, authority: Authority, now: Date
    ) throws -> Certificate {
        let publicKey = Certificate.PublicKey(key.publicKey)
        let notBefore = now.addingTimeInterval(-backdating)
        // Never outlive the issuer.
        let notAfter = min(notBefore.addingTimeInterval(serverLifetime), authority.certificate.notValidAfter)
        do {
            let subject = try DistinguishedName {
                OrganizationName("Homeward")
                CommonName("localhost")
            }
            let extendedKeyUsage = try ExtendedKeyUsage([.serverAuth])
            let authorityKeyIdentifier = AuthorityKeyIdentifier(keyIdentifier: authority.keyIdentifier)
            let extensions = try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                extendedKeyUsage
                SubjectKeyIdentifier(hash: publicKey)
                authorityKeyIdentifier
                SubjectAlternativeNames(serverNames)
            }
            return try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: publicKey,
                notValidBefore: notBefore,
                notValidAfter: notAfter,
                issuer: authority.certificate.subject,
                subject: subject,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions,
                issuerPrivateKey: Certificate.PrivateKey(authority.key)
            )
        } catch {
            throw TLSSetupError.certificateGenerationFailed(what: "the development server certificate", reason: "\(error)")
        }
    }

    /// Whether `server.pem`/`server-key.pem` hold a leaf from `authority`, followed by `authority`,
    /// matching the key and valid for more than the renewal window.
    static func serverCertificateIsUsable(
        certificatePath: String, keyPath: String, authority: Authority, now: Date
    ) -> Bool {
        guard let chainText = readText(certificatePath), let keyText = readText(keyPath),
            let documents = try? PEMDocument.parseMultiple(pemString: chainText),
            documents.count == 2, documents.allSatisfy({ $0.discriminator == "CERTIFICATE" }),
            let leaf = try? Certificate(pemDocument: documents[0]),
            let chainedCA = try? Certificate(pemDocument: documents[1]),
            let key = try? P256.Signing.PrivateKey(pemRepresentation: keyText)
        else { return false }
        return chainedCA == authority.certificate
            && leaf.publicKey == Certificate.PublicKey(key.publicKey)
            && leaf.issuer == authority.certificate.subject
            && authority.certificate.publicKey.isValidSignature(leaf.signature, for: leaf)
            && leaf.notValidBefore <= now
            && leaf.notValidAfter > now.addingTimeInterval(renewalWindow)
    }

    // MARK: - Files

    static func pem(of certificate: Certificate, purpose: String) throws -> String {
        do {
            return try certificate.serializeAsPEM().pemString + "\n"
        } catch {
            throw TLSSetupError.certificateGenerationFailed(what: purpose, reason: "cannot encode it as PEM: \(error)")
        }
    }

    static func readText(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).flatMap { String(data: $0, encoding: .utf8) }
    }

    static func createDirectoryIfMissing(_ directory: URL) throws {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw TLSSetupError.cannotCreateDirectory(path: directory.path, reason: "a file with that name exists")
            }
            return
        }
        do {
            try manager.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // The mode passed to mkdir is filtered by the umask; set it exactly.
            try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        } catch {
            throw TLSSetupError.cannotCreateDirectory(path: directory.path, reason: TLSSetupError.describe(error))
        }
    }

    /// Writes `text` to a new file next to `path` that has `permissions` before it holds any data, then
    /// renames it over `path`.
    static func writeAtomically(_ text: String, to path: String, permissions: Int) throws {
        let manager = FileManager.default
        let destination = URL(fileURLWithPath: path)
        let temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).tmp").path
        guard manager.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: permissions])
        else {
            throw TLSSetupError.cannotWrite(path: path, reason: "cannot create the temporary file \(temporary)")
        }
        var renamed = false
        defer {
            if !renamed { try? manager.removeItem(atPath: temporary) }
        }
        do {
            try manager.setAttributes([.posixPermissions: permissions], ofItemAtPath: temporary)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            do {
                try handle.write(contentsOf: Data(text.utf8))
                try handle.synchronize()
            } catch {
                try? handle.close()
                throw error
            }
            try handle.close()
        } catch {
            throw TLSSetupError.cannotWrite(path: path, reason: TLSSetupError.describe(error))
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            throw TLSSetupError.cannotWrite(path: path, reason: "cannot rename \(temporary) into place: \(reason)")
        }
        renamed = true
    }

    static func tightenPermissions(of path: String) {
        let manager = FileManager.default
        guard let attributes = try? manager.attributesOfItem(atPath: path),
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0
        else { return }
        try? manager.setAttributes([.posixPermissions: mode & 0o700], ofItemAtPath: path)
    }
}
