import Foundation
import HomewardTestSupport
import XCTest

/// `--ktls` on the real executable: the relay refuses to start (exit 1, before it listens or makes its data
/// directory) and says what kernel TLS lacks here: the backend, the kernel's tls module, the memory buffers.
final class KernelTLSFlagTests: XCTestCase {
    private var moduleLoaded: Bool {
        let listed = (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_available_ulp", encoding: .utf8)) ?? ""
        return listed.split(whereSeparator: \.isWhitespace).contains("tls")
    }

    func testOnOpenSSLTheRelayRefusesToStartNamingWhatIsMissing() throws {
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-ktls-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let (status, output) = try runToEnd(RelayProcess.executable(),
                                            ["--host", "127.0.0.1", "--port", "0", "--data-dir", dataDirectory,
                                             "--ktls", "--tls-backend", "openssl"])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("cannot use kernel TLS (--ktls): "), output)
        XCTAssertTrue(output.contains("memory buffers"), output)
        XCTAssertTrue(output.contains("Leave out --ktls (HOMEWARD_KTLS)"), output)
        XCTAssertFalse(output.contains("needs --tls-backend openssl"), output)
        if !moduleLoaded { XCTAssertTrue(output.contains("the kernel has no tls module loaded"), output) }
        XCTAssertFalse(output.contains("listening"), output)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dataDirectory), "refused before making its data directory")
    }

    func testTheEnvironmentVariableOnSwiftNIOSSLIsRefusedNamingTheBackend() throws {
        let (status, output) = try runRelayToEnd([], environment: ["HOMEWARD_KTLS": "true", "HOMEWARD_TLS_BACKEND": "nio-ssl"])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("kTLS needs --tls-backend openssl (the TLS backend is nio-ssl"), output)
        XCTAssertFalse(output.contains("listening"), output)
    }

    func testAValueOtherThanTrueOrFalseIsAUsageError() throws {
        let (status, output) = try runRelayToEnd([], environment: ["HOMEWARD_KTLS": "on"])
        XCTAssertNotEqual(status, 0, output)
        XCTAssertTrue(output.contains("HOMEWARD_KTLS='on' is not a valid value for --ktls"), output)
    }

    func testHelpExplainsTheFlag() throws {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.contains("--ktls"), output)
        XCTAssertTrue(output.contains("tcp_available_ulp"), output)
    }
}
