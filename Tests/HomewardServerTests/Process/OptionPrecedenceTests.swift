import Foundation
import HomewardTestSupport
import XCTest

/// Where an option's value comes from, on the real executable: the flag, else its `HOMEWARD_*` variable,
/// else the default. A variable the option cannot take stops the relay with a message naming the variable,
/// and `--help` names every option's variable.
final class OptionPrecedenceTests: XCTestCase {
    /// The node id the relay's "listening" line names when started with `arguments` and `environment`.
    private func nodeID(_ arguments: [String], _ environment: [String: String]) async throws -> String {
        let relay = try await RelayProcess.start(arguments, environment: environment)
        relay.stop()
        let lines = try await relay.log.allLines
        let listening = try XCTUnwrap(lines.first { $0.contains("homeward relay listening") }, "\(lines)")
        let value = try XCTUnwrap(listening.range(of: " node="), listening).upperBound
        return String(listening[value...].prefix { !$0.isWhitespace })
    }

    func testAFlagBeatsItsVariableWhichBeatsTheDefault() async throws {
        let fromBoth = try await nodeID(["--node-id", "from-flag"], ["HOMEWARD_NODE_ID": "from-variable"])
        XCTAssertEqual(fromBoth, "from-flag")
        let fromVariable = try await nodeID([], ["HOMEWARD_NODE_ID": "from-variable"])
        XCTAssertEqual(fromVariable, "from-variable")
        // An empty variable is no variable: the default, the host name and the process id.
        let byDefault = try await nodeID([], ["HOMEWARD_NODE_ID": ""])
        XCTAssertNotNil(byDefault.range(of: #"^.+-[0-9]+$"#, options: .regularExpression), byDefault)
    }

    func testAVariableTheOptionCannotTakeStopsTheRelayNamingTheVariable() throws {
        let cases: [(String, String, String)] = [
            ("HOMEWARD_MAX_BACKLOG", "many", "max-backlog"),
            ("HOMEWARD_IDLE_TIMEOUT", "soon", "idle-timeout"),
            ("HOMEWARD_SHARE_MIN_TTL", "1.5", "share-min-ttl"),
            ("HOMEWARD_PUSH_ALLOW_PRIVATE", "yes", "push-allow-private"),
        ]
        for (variable, value, option) in cases {
            let (status, output) = try runRelayToEnd([], environment: [variable: value])
            XCTAssertNotEqual(status, 0, variable)
            XCTAssertTrue(output.contains("\(variable)='\(value)' is not a valid value for --\(option)"), "\(variable): \(output)")
        }
    }

    func testAFlagIsUsedWithoutReadingItsVariable() throws {
        // runRelayToEnd gives --port 0, so HOMEWARD_PORT, which --port could not take, is not even read: the
        // relay gets as far as checking the whole configuration, and stops there on --threads 0.
        let (status, output) = try runRelayToEnd(["--threads", "0"], environment: ["HOMEWARD_PORT": "eighty"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("threads must be at least 1"), output)
        XCTAssertFalse(output.contains("HOMEWARD_PORT"), output)
    }

    /// The options `--help` lists, without their dashes.
    private func optionsInHelp() throws -> (options: [String], output: String) {
        let (status, output) = try runRelayToEnd(["--help"])
        XCTAssertEqual(status, 0)
        let options = output.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  --") else { return nil }
            return String(line.dropFirst(4).prefix { $0.isLetter || $0.isNumber || $0 == "-" })
        }
        return (options, output)
    }

    func testHelpNamesTheVariableOfEveryOptionAndItsDefault() throws {
        let (options, output) = try optionsInHelp()
        let text = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertGreaterThan(options.count, 40, output)
        for option in options {
            let variable = "HOMEWARD_" + option.uppercased().replacingOccurrences(of: "-", with: "_")
            XCTAssertTrue(text.contains("[env: \(variable)]"), "--\(option): \(output)")
        }
        for shown in ["[env: HOMEWARD_PORT] [default: 8443]", "[env: HOMEWARD_STORE_TIMEOUT] [default: 5]",
                      "[env: HOMEWARD_TOKEN_LIFETIME] [default: 30]", "[env: HOMEWARD_LOST_CONTACT_GRACE] [default: 60]",
                      "[env: HOMEWARD_LOG_LEVEL] [default: info]", "[env: HOMEWARD_MAX_PUSH_SUBSCRIPTIONS] [default: 10]"] {
            XCTAssertTrue(text.contains(shown), "\(shown): \(output)")
        }
    }

    /// An operator configures from deploy/: its README's table and relay.env.example name every option `--help` lists.
    func testTheDeployDocsNameEveryOption() throws {
        let (options, output) = try optionsInHelp()
        XCTAssertGreaterThan(options.count, 40, output)
        let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("deploy")
        let readme = try String(contentsOf: deploy.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(contentsOf: deploy.appendingPathComponent("relay.env.example"), encoding: .utf8)
        for option in options where option != "help" {
            XCTAssertTrue(readme.contains("| `--\(option)`") || readme.contains(", `--\(option)`"), "deploy/README.md's table lacks --\(option)")
            let variable = "HOMEWARD_" + option.uppercased().replacingOccurrences(of: "-", with: "_")
            XCTAssertTrue(example.contains("#\(variable)="), "deploy/relay.env.example lacks \(variable)")
        }
    }
}
