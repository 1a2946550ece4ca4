import Foundation
import HomewardServer
import XCTest

/// A relay that cannot start says why, in words an operator can act on.
final class StartupErrorTests: EndToEndTestCase {
    func testAPortInUseIsReportedWithTheAddressAndAHint() async throws {
        let first = try await startRelay()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-startup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = try first.port
        config.dataDirectory = directory
        config.passwordIterations = 210_000
        do {
            let running = try await RelayServer(configuration: config, logger: TestRelay.logger).start()
            await running.shutdown()
            XCTFail("a second relay started on a port in use")
        } catch let error as RelayStartupError {
            guard case .cannotListen(let host, let port, _) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(host, "127.0.0.1")
            XCTAssertEqual(port, config.port)
            XCTAssertTrue(error.description.contains("already in use"), error.description)
        }
        // The first relay is unaffected.
        let probe = try await first.connect()
        try await probe.ok("ping")
    }

    func testAMetricsPortInUseIsReportedWithItsFlag() async throws {
        let first = try await startRelay { $0.metricsListen = ListenAddress(host: "127.0.0.1", port: 0) }
        let taken = try XCTUnwrap(try first.running.metricsPort)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-startup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.dataDirectory = directory
        config.passwordIterations = 210_000
        config.metricsListen = ListenAddress(host: "127.0.0.1", port: taken)
        do {
            let running = try await RelayServer(configuration: config, logger: TestRelay.logger).start()
            await running.shutdown()
            XCTFail("a second relay started with a metrics port in use")
        } catch let error as RelayStartupError {
            guard case .cannotListen(_, let port, _) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(port, taken)
            XCTAssertTrue(error.description.contains("--metrics-listen"), error.description)
        }
    }

    func testANewDataDirectoryIsOwnerOnlyWhateverTheUmask() async throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-umask-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let previous = umask(0)
        defer { umask(previous) }
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.dataDirectory = parent + "/data"
        config.passwordIterations = 210_000
        let running = try await RelayServer(configuration: config, logger: TestRelay.logger).start()
        await running.shutdown()
        let attributes = try FileManager.default.attributesOfItem(atPath: config.dataDirectory)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o700)
        let database = try FileManager.default.attributesOfItem(atPath: config.databasePath)
        XCTAssertEqual((database[.posixPermissions] as? NSNumber)?.intValue, 0o600)
    }

    func testADataDirectoryThatCannotBeMadeIsReported() async throws {
        var config = RelayConfiguration()
        config.host = "127.0.0.1"
        config.port = 0
        config.dataDirectory = "/dev/null/homeward"
        do {
            let running = try await RelayServer(configuration: config, logger: TestRelay.logger).start()
            await running.shutdown()
            XCTFail("the relay started without a data directory")
        } catch let error as RelayStartupError {
            guard case .cannotCreateDataDirectory(let path, _) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(path, "/dev/null/homeward")
            XCTAssertTrue(error.description.contains("Not a directory"), error.description)
        }
    }
}
