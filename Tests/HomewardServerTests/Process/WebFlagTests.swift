import Foundation
import HomewardTestSupport
import XCTest

/// The web app's flags on the real executable: a tile template that could widen the page's policy, an
/// attribution without tiles, or a web root without the app's pages stop the relay at start-up with a
/// message that says what is wrong.
final class WebFlagTests: XCTestCase {
    private func runRelay(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-web-flag-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        return try runToEnd(RelayProcess.executable(),
                            ["--host", "127.0.0.1", "--port", "0", "--data-dir", data.path] + arguments,
                            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func testBadWebSettingsAreStartupErrors() throws {
        let cases: [([String], [String: String], String)] = [
            (["--map-tiles", "https://t.example/{z}/{x}.png"], [:], "needs {z}, {x} and {y}"),
            ([], ["HOMEWARD_MAP_TILES": "https://t.example; script-src */{z}/{x}/{y}"], "is not an http(s) URL template"),
            (["--map-attribution", "© somebody"], [:], "--map-attribution needs --map-tiles"),
            (["--web-root", "/nonexistent/homeward-web"], [:], "cannot load the web app"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelay(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
        }
    }

    func testHelpExplainsTheWebSettings() throws {
        let (status, output) = try runRelay(["--help"])
        XCTAssertEqual(status, 0)
        for option in ["--web-root <dir>", "--leaflet-dir <dir>", "--map-tiles <url-template>", "--map-attribution <text>"] {
            XCTAssertTrue(output.contains(option), "\(option): \(output)")
        }
    }
}
