import Foundation
import HomewardOpenSSL
import NIOSSL
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the relay could not set up TLS; each message names the file and what is wrong with it.
public enum TLSSetupError: Error, CustomStringConvertible, Sendable {
    /// Only one of the certificate and key paths was configured.
    case incompleteConfiguration
    case fileNotFound(path: String, role: String)
    case unreadableFile(path: String, role: String, reason: String)
    case noCertificates(path: String)
    case invalidCertificate(path: String, reason: String)
    case invalidPrivateKey(path: String, reason: String)
    case encryptedPrivateKey(path: String)
    case keyDoesNotMatchCertificate(certificatePath: String, privateKeyPath: String)
    case certificateExpired(path: String, notValidAfter: Date)
    case cannotCreateDirectory(path: String, reason: String)
    case cannotWrite(path: String, reason: String)
    case certificateGenerationFailed(what: String, reason: String)

    public var description: String {
        switch self {
        case .incompleteConfiguration:
            return "TLS: give both a certificate chain and a private key, or neither to use a generated development certificate"
        case .fileNotFound(let path, let role):
            return "TLS \(role) \(path): no such file"
        case .unreadableFile(let path, let role, let reason):
            return "TLS \(role) \(path): cannot read it: \(reason)"
        case .noCertificates(let path):
            return "TLS certificate chain \(path): no PEM certificate (-----BEGIN CERTIFICATE-----) in the file"
        case .invalidCertificate(let path, let reason):
            return "TLS certificate chain \(path): not a valid PEM certificate chain: \(reason)"
        case .invalidPrivateKey(let path, let reason):
            return "TLS private key \(path): not a valid PEM private key: \(reason)"
        case .encryptedPrivateKey(let path):
            return "TLS private key \(path): the key is encrypted; give an unencrypted key (e.g. openssl pkey -in KEY -out PLAIN)"
        case .keyDoesNotMatchCertificate(let certificatePath, let privateKeyPath):
            return "TLS private key \(privateKeyPath) does not belong to the first certificate in \(certificatePath)"
        case .certificateExpired(let path, let notValidAfter):
            return "TLS certificate chain \(path): the server certificate expired on \(notValidAfter)"
        case .cannotCreateDirectory(let path, let reason):
            return "TLS development certificate directory \(path): cannot create it: \(reason)"
        case .cannotWrite(let path, let reason):
            return "TLS development certificate file \(path): cannot write it: \(reason)"
        case .certificateGenerationFailed(let what, let reason):
            return "TLS: cannot create \(what): \(reason)"
        }
    }

    /// A short reason for a Foundation, POSIX or BoringSSL error, without the NSError boilerplate.
    static func describe(_ error: any Error) -> String {
        if let cocoa = error as? CocoaError, let underlying = cocoa.userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain
        {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if let posix = error as? POSIXError {
            return String(cString: strerror(posix.code.rawValue))
        }
        if error is NIOSSLError || error is BoringSSLError {
            return String(describing: error)
        }
        return (error as NSError).localizedDescription
    }
}

/// Builds the relay's server-side TLS configuration from PEM files.
public enum TLSFactory {
    /// A TLS 1.2+ server configuration for swift-nio-ssl that presents the chain in `certificatePath` (leaf first, then
    /// any intermediates) with the key in `privateKeyPath`, and asks clients for no certificate.
    ///
    /// - Throws: `TLSSetupError` naming the file and the problem.
    public static func serverConfiguration(
        certificatePath: String, privateKeyPath: String, now: Date = Date()
    ) throws -> TLSConfiguration {
        let chainText = try readPEM(certificatePath, role: "certificate chain")
        let keyText = try readPEM(privateKeyPath, role: "private key")

        guard chainText.contains("-----BEGIN CERTIFICATE-----") else {
            throw TLSSetupError.noCertificates(path: certificatePath)
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw TLSSetupError.invalidCertificate(path: certificatePath, reason: TLSSetupError.describe(error))
        }
        guard !chain.isEmpty else { throw TLSSetupError.noCertificates(path: certificatePath) }

        if keyText.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || keyText.contains("Proc-Type: 4,ENCRYPTED") {
            throw TLSSetupError.encryptedPrivateKey(path: privateKeyPath)
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
        } catch {
            throw TLSSetupError.invalidPrivateKey(path: privateKeyPath, reason: TLSSetupError.describe(error))
        }

        try checkLeaf(chainText: chainText, keyText: keyText, certificatePath: certificatePath,
                      privateKeyPath: privateKeyPath, now: now)

        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        configuration.minimumTLSVersion = .tlsv12
        // TLS 1.2 only with forward-secret AEAD suites, as on the OpenSSL backend (TLS 1.3's are all AEAD).
        configuration.cipherSuites = "ECDHE+AESGCM:ECDHE+CHACHA20"
        configuration.applicationProtocols = ["http/1.1"]
        configuration.certificateVerification = .none
        return configuration
    }

    /// The same server on the system's OpenSSL: the same files, the same checks and messages, with the
    /// policy of `OpenSSLServerContext` (TLS 1.2 and 1.3, no client certificate).
    ///
    /// - Throws: `TLSSetupError` naming the file and the problem.
    public static func openSSLContext(
        certificatePath: String, privateKeyPath: String, now: Date = Date()
    ) throws -> OpenSSLServerContext {
        let chainText = try readPEM(certificatePath, role: "certificate chain")
        let keyText = try readPEM(privateKeyPath, role: "private key")
        guard chainText.contains("-----BEGIN CERTIFICATE-----") else {
            throw TLSSetupError.noCertificates(path: certificatePath)
        }
        if keyText.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || keyText.contains("Proc-Type: 4,ENCRYPTED") {
            throw TLSSetupError.encryptedPrivateKey(path: privateKeyPath)
        }
        try checkLeaf(chainText: chainText, keyText: keyText, certificatePath: certificatePath,
                      privateKeyPath: privateKeyPath, now: now)
        do {
            return try OpenSSLServerContext(certificateChainPath: certificatePath, privateKeyPath: privateKeyPath)
        } catch let error as OpenSSLSetupError {
            switch error {
            case .certificateChain(let path, let reason): throw TLSSetupError.invalidCertificate(path: path, reason: reason)
            case .privateKey(let path, let reason): throw TLSSetupError.invalidPrivateKey(path: path, reason: reason)
            case .keyDoesNotMatchCertificate:
                throw TLSSetupError.keyDoesNotMatchCertificate(certificatePath: certificatePath, privateKeyPath: privateKeyPath)
            case .context(let reason): throw TLSSetupError.certificateGenerationFailed(what: "an OpenSSL server context", reason: reason)
            }
        }
    }

    /// Catches the two mistakes BoringSSL reports least clearly: a key from another certificate, and an
    /// expired certificate. Only applies when swift-certificates can parse both (EC, RSA, Ed25519).
    private static func checkLeaf(
        chainText: String, keyText: String, certificatePath: String, privateKeyPath: String, now: Date
    ) throws {
        guard let documents = try? PEMDocument.parseMultiple(pemString: chainText),
            let first = documents.first(where: { $0.discriminator == "CERTIFICATE" }),
            let leaf = try? Certificate(pemDocument: first)
        else { return }
        if let keyDocument = try? PEMDocument.parseMultiple(pemString: keyText)
                .first(where: { $0.discriminator.hasSuffix("PRIVATE KEY") }),
            let privateKey = try? Certificate.PrivateKey(pemDocument: keyDocument),
            privateKey.publicKey != leaf.publicKey
        {
            throw TLSSetupError.keyDoesNotMatchCertificate(
                certificatePath: certificatePath, privateKeyPath: privateKeyPath)
        }
        if leaf.notValidAfter < now {
            throw TLSSetupError.certificateExpired(path: certificatePath, notValidAfter: leaf.notValidAfter)
        }
    }

    private static func readPEM(_ path: String, role: String) throws -> String {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw TLSSetupError.fileNotFound(path: path, role: role)
        }
        if isDirectory.boolValue {
            throw TLSSetupError.unreadableFile(path: path, role: role, reason: "it is a directory")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw TLSSetupError.unreadableFile(path: path, role: role, reason: TLSSetupError.describe(error))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw TLSSetupError.unreadableFile(path: path, role: role, reason: "not a PEM text file (is it DER?)")
        }
        return text
    }
}
