import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import SwiftASN1
import X509
import XCTest

@testable import HomewardServer

final class DevCertificatesTests: XCTestCase {
    private var root: URL!
    /// Does not exist before the first `ensure`, to check that it is created.
    private var directory: URL { root.appendingPathComponent("data/certs") }

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("homeward-devcerts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    // MARK: - Files

    func testCreatesAllFilesWithPrivateModes() throws {
        let certificates = try DevCertificates.ensure(in: directory)
        XCTAssertTrue(certificates.created)
        XCTAssertTrue(certificates.createdAuthority)

        XCTAssertEqual(try mode(directory.path), 0o700)
        XCTAssertEqual(try mode(certificates.caKeyPath), 0o600)
        XCTAssertEqual(try mode(certificates.privateKeyPath), 0o600)
        XCTAssertEqual(certificates.caPath, directory.appendingPathComponent("dev-ca.pem").path)
        XCTAssertEqual(certificates.caKeyPath, directory.appendingPathComponent("dev-ca-key.pem").path)
        XCTAssertEqual(certificates.certificatePath, directory.appendingPathComponent("server.pem").path)
        XCTAssertEqual(certificates.privateKeyPath, directory.appendingPathComponent("server-key.pem").path)

        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertEqual(names, ["dev-ca-key.pem", "dev-ca.pem", "server-key.pem", "server.pem"], "no temporary files left")

        let chain = try certificateChain(certificates.certificatePath)
        XCTAssertEqual(chain.count, 2, "server.pem is the leaf followed by the CA")
        XCTAssertEqual(chain[1], try Certificate(pemEncoded: text(certificates.caPath)))
        XCTAssertTrue(try text(certificates.caKeyPath).contains("-----BEGIN PRIVATE KEY-----"))
        XCTAssertTrue(try text(certificates.privateKeyPath).contains("-----BEGIN PRIVATE KEY-----"))
    }

    func testSecondCallReusesEverything() throws {
        let first = try DevCertificates.ensure(in: directory)
        let before = try snapshot(first)
        let second = try DevCertificates.ensure(in: directory)
        XCTAssertFalse(second.created)
        XCTAssertFalse(second.createdAuthority)
        XCTAssertEqual(try snapshot(second), before)
    }

    func testLooseKeyModeIsTightenedOnReuse() throws {
        let certificates = try DevCertificates.ensure(in: directory)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: certificates.privateKeyPath)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: certificates.caKeyPath)
        _ = try DevCertificates.ensure(in: directory)
        XCTAssertEqual(try mode(certificates.privateKeyPath), 0o600)
        XCTAssertEqual(try mode(certificates.caKeyPath), 0o600)
    }

    func testExpiringServerCertificateIsReissuedWithTheSameCA() throws {
        let first = try DevCertificates.ensure(in: directory)
        let before = try snapshot(first)
        // 800 days on, the 825-day leaf has less than 30 days left; the 10-year CA is fine.
        let later = Date().addingTimeInterval(800 * 86_400)
        let renewed = try DevCertificates.ensure(in: directory, now: later)
        XCTAssertTrue(renewed.created)
        XCTAssertFalse(renewed.createdAuthority)
        let after = try snapshot(renewed)
        XCTAssertEqual(after.ca, before.ca)
        XCTAssertEqual(after.caKey, before.caKey)
        XCTAssertNotEqual(after.certificate, before.certificate)
        XCTAssertNotEqual(after.key, before.key)
        let leaf = try certificateChain(renewed.certificatePath)[0]
        XCTAssertGreaterThan(leaf.notValidAfter, later.addingTimeInterval(800 * 86_400))

        // 125 days left: kept.
        let stillFine = try DevCertificates.ensure(in: directory, now: later.addingTimeInterval(700 * 86_400))
        XCTAssertFalse(stillFine.created)
    }

    func testCorruptServerCertificateIsReissuedWithTheSameCA() throws {
        let first = try DevCertificates.ensure(in: directory)
        let before = try snapshot(first)
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: first.certificatePath))
        let again = try DevCertificates.ensure(in: directory)
        XCTAssertTrue(again.created)
        XCTAssertFalse(again.createdAuthority)
        XCTAssertEqual(try snapshot(again).ca, before.ca)
        XCTAssertEqual(try certificateChain(again.certificatePath).count, 2)
    }

    func testServerKeyFromElsewhereIsReissued() throws {
        let first = try DevCertificates.ensure(in: directory)
        try FileManager.default.removeItem(atPath: first.privateKeyPath)
        try FileManager.default.copyItem(atPath: first.caKeyPath, toPath: first.privateKeyPath)
        let again = try DevCertificates.ensure(in: directory)
        XCTAssertTrue(again.created)
        XCTAssertFalse(again.createdAuthority)
        XCTAssertNoThrow(try TLSFactory.serverConfiguration(
            certificatePath: again.certificatePath, privateKeyPath: again.privateKeyPath))
    }

    func testCorruptOrMissingCARegeneratesEverything() async throws {
        let first = try DevCertificates.ensure(in: directory)
        let before = try snapshot(first)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: first.caKeyPath))
        let regenerated = try DevCertificates.ensure(in: directory)
        XCTAssertTrue(regenerated.created)
        XCTAssertTrue(regenerated.createdAuthority)
        let after = try snapshot(regenerated)
        XCTAssertNotEqual(after.ca, before.ca)
        XCTAssertNotEqual(after.certificate, before.certificate)
        XCTAssertEqual(try mode(regenerated.caKeyPath), 0o600)

        try FileManager.default.removeItem(atPath: regenerated.caPath)
        let again = try DevCertificates.ensure(in: directory)
        XCTAssertTrue(again.createdAuthority)
        XCTAssertNotEqual(try snapshot(again).ca, after.ca)
        let verifies = try await leafVerifies(again, hostname: "localhost", ip: nil)
        XCTAssertTrue(verifies)
    }

    func testDirectoryThatIsAFileIsAClearError() throws {
        let file = root.appendingPathComponent("certs")
        try Data().write(to: file)
        XCTAssertThrowsError(try DevCertificates.ensure(in: file)) { error in
            XCTAssertTrue("\(error)".contains(file.path), "\(error)")
        }
    }

    // MARK: - Certificate contents

    func testCertificateContents() throws {
        let certificates = try DevCertificates.ensure(in: directory)
        let ca = try Certificate(pemEncoded: text(certificates.caPath))
        let leaf = try certificateChain(certificates.certificatePath)[0]
        let now = Date()

        XCTAssertEqual(ca.issuer, ca.subject, "the CA is self-signed")
        XCTAssertTrue(ca.publicKey.isValidSignature(ca.signature, for: ca))
        XCTAssertTrue(ca.subject.description.contains("CN=Homeward development CA"), ca.subject.description)
        XCTAssertEqual(try ca.extensions.basicConstraints, .isCertificateAuthority(maxPathLength: 0))
        XCTAssertEqual(ca.extensions[oid: .X509ExtensionID.basicConstraints]?.critical, true)
        XCTAssertEqual(try ca.extensions.keyUsage, KeyUsage(keyCertSign: true, cRLSign: true))
        XCTAssertLessThan(ca.notValidBefore, now)
        XCTAssertGreaterThan(ca.notValidAfter, now.addingTimeInterval(3_649 * 86_400))

        XCTAssertEqual(leaf.issuer, ca.subject)
        XCTAssertTrue(ca.publicKey.isValidSignature(leaf.signature, for: leaf))
        XCTAssertTrue(leaf.subject.description.contains("CN=localhost"), leaf.subject.description)
        XCTAssertNotEqual(leaf.serialNumber, ca.serialNumber)
        XCTAssertEqual(try leaf.extensions.basicConstraints, .notCertificateAuthority)
        XCTAssertEqual(try leaf.extensions.keyUsage, KeyUsage(digitalSignature: true))
        XCTAssertEqual(try leaf.extensions.extendedKeyUsage, try ExtendedKeyUsage([.serverAuth]))
        let names = try XCTUnwrap(try leaf.extensions.subjectAlternativeNames)
        XCTAssertEqual(Array(names), [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
        ])
        XCTAssertEqual(
            try leaf.extensions.authorityKeyIdentifier?.keyIdentifier,
            try ca.extensions.subjectKeyIdentifier?.keyIdentifier)
        XCTAssertNotNil(try leaf.extensions.subjectKeyIdentifier)
        let lifetime = leaf.notValidAfter.timeIntervalSince(leaf.notValidBefore)
        XCTAssertEqual(lifetime, 825 * 86_400, accuracy: 1)
    }

    func testLeafVerifiesAgainstTheCA() async throws {
        let certificates = try DevCertificates.ensure(in: directory)
        var ok = try await leafVerifies(certificates, hostname: "localhost", ip: nil)
        XCTAssertTrue(ok, "localhost")
        ok = try await leafVerifies(certificates, hostname: nil, ip: "127.0.0.1")
        XCTAssertTrue(ok, "127.0.0.1")
        ok = try await leafVerifies(certificates, hostname: nil, ip: "::1")
        XCTAssertTrue(ok, "::1")
        ok = try await leafVerifies(certificates, hostname: "example.com", ip: nil)
        XCTAssertFalse(ok, "a name the certificate does not cover")
    }

    // MARK: - TLSFactory

    func testTLSFactoryBuildsAContext() throws {
        let certificates = try DevCertificates.ensure(in: directory)
        let configuration = try TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: certificates.privateKeyPath)
        XCTAssertEqual(configuration.minimumTLSVersion, .tlsv12)
        XCTAssertEqual(configuration.certificateVerification, .none)
        XCTAssertEqual(configuration.certificateChain.count, 2)
        XCTAssertNoThrow(try NIOSSLContext(configuration: configuration))
    }

    func testTLSHandshakeWithTheDevCertificate() async throws {
        let certificates = try DevCertificates.ensure(in: directory)
        let serverContext = try NIOSSLContext(configuration: TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: certificates.privateKeyPath))
        var clientConfiguration = TLSConfiguration.makeClientConfiguration()
        clientConfiguration.trustRoots = .file(certificates.caPath)
        let clientContext = try NIOSSLContext(configuration: clientConfiguration)

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        NIOSSLServerHandler(context: serverContext), EchoHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try XCTUnwrap(server.localAddress?.port)

        let reply = group.next().makePromise(of: String.self)
        let client = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: clientContext, serverHostname: "localhost")
                    try channel.pipeline.syncOperations.addHandlers(tls, PingHandler(promise: reply))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()

        do {
            let echoed = try await reply.futureResult.get()
            XCTAssertEqual(echoed, "ping")
        } catch {
            XCTFail("TLS connection to the dev certificate failed: \(error)")
        }
        try? await client.close()
        try? await server.close()
        try await group.shutdownGracefully()
    }

    func testTLSFactoryErrorsNameTheFile() throws {
        let certificates = try DevCertificates.ensure(in: directory)
        let missing = root.appendingPathComponent("missing.pem").path

        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: missing, privateKeyPath: certificates.privateKeyPath)) { error in
            guard case TLSSetupError.fileNotFound(let path, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, missing)
            XCTAssertTrue("\(error)".contains(missing))
        }

        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: missing)) { error in
            guard case TLSSetupError.fileNotFound(let path, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, missing)
        }

        // Swapped files: the key file holds no certificate.
        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: certificates.privateKeyPath, privateKeyPath: certificates.certificatePath)) { error in
            guard case TLSSetupError.noCertificates(let path) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, certificates.privateKeyPath)
        }

        // The CA key with the server certificate.
        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: certificates.caKeyPath)) { error in
            guard case TLSSetupError.keyDoesNotMatchCertificate = error else { return XCTFail("\(error)") }
            XCTAssertTrue("\(error)".contains(certificates.caKeyPath), "\(error)")
        }

        let garbage = root.appendingPathComponent("garbage-key.pem")
        try Data("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8).write(to: garbage)
        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: garbage.path)) { error in
            guard case TLSSetupError.invalidPrivateKey(let path, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, garbage.path)
        }

        XCTAssertThrowsError(try TLSFactory.serverConfiguration(
            certificatePath: certificates.certificatePath, privateKeyPath: certificates.privateKeyPath,
            now: Date().addingTimeInterval(900 * 86_400))) { error in
            guard case TLSSetupError.certificateExpired = error else { return XCTFail("\(error)") }
        }

        XCTAssertTrue("\(TLSSetupError.incompleteConfiguration)".contains("private key"))
    }

    // MARK: - Helpers

    private struct Snapshot: Equatable {
        var ca, caKey, certificate, key: Data
    }

    private func snapshot(_ certificates: DevCertificates) throws -> Snapshot {
        func read(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }
        return Snapshot(
            ca: try read(certificates.caPath), caKey: try read(certificates.caKeyPath),
            certificate: try read(certificates.certificatePath), key: try read(certificates.privateKeyPath))
    }

    private func text(_ path: String) throws -> String {
        try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8)
    }

    private func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try XCTUnwrap(attributes[.posixPermissions] as? NSNumber).intValue & 0o777
    }

    private func certificateChain(_ path: String) throws -> [Certificate] {
        try PEMDocument.parseMultiple(pemString: text(path)).map { try Certificate(pemDocument: $0) }
    }

    private func leafVerifies(_ certificates: DevCertificates, hostname: String?, ip: String?) async throws -> Bool {
        let ca = try Certificate(pemEncoded: text(certificates.caPath))
        let leaf = try certificateChain(certificates.certificatePath)[0]
        var verifier = Verifier(rootCertificates: CertificateStore([ca])) {
            RFC5280Policy()
            ServerIdentityPolicy(serverHostname: hostname, serverIP: ip)
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore())
        switch result {
        case .validCertificate(let chain):
            return Array(chain) == [leaf, ca]
        case .couldNotValidate:
            return false
        }
    }
}

/// Echoes whatever it reads.
private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

/// Sends a ping once connected and completes `promise` with the echoed reply; application data only
/// flows after the TLS handshake (including the client's verification of the chain) succeeded.
private final class PingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let promise: EventLoopPromise<String>

    init(promise: EventLoopPromise<String>) { self.promise = promise }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "ping")), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        promise.succeed(buffer.readString(length: buffer.readableBytes) ?? "")
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }
}
