import Foundation
import HomewardProtocol
import XCTest

/// `homeward sessions`, `logout --all` and `friends block / unblock / blocks`, as a person runs them.
final class CLIAccountCommandsTests: XCTestCase {
    private let password = "correct horse\n"

    func testSessionsRevokeAndLogoutAll() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let name = uniqueName("dev")
        try await cli.run(["register", name, "--password-stdin", "--profile", "laptop"] + cli.connection, stdin: password).expectSuccess()
        try await cli.run(["login", name, "--password-stdin", "--profile", "phone"] + cli.connection, stdin: password).expectSuccess()

        let listed = try await cli.run(["--json", "sessions", "--profile", "phone"]).expectSuccess()
        let sessions = try XCTUnwrap(listed.json.first?.array("sessions"))
        XCTAssertEqual(sessions.map { $0["current"] }, [false, true])
        let human = try await cli.run(["sessions", "--profile", "phone"]).expectSuccess()
        XCTAssertTrue(human.stdout.contains("(this device)"), human.stdout)

        let laptopID = try XCTUnwrap(sessions.first?["id"]?.stringValue)
        try await cli.run(["sessions", "revoke", laptopID, "--profile", "phone"]).expectSuccess()
        let revoked = try await cli.run(["whoami", "--profile", "laptop"])
        XCTAssertNotEqual(revoked.status, 0, "the laptop's token no longer signs in")
        XCTAssertTrue(revoked.stderr.contains("[unauthenticated]"), revoked.stderr)
        let unknown = try await cli.run(["sessions", "revoke", "tk_nosuchtoken", "--profile", "phone"])
        XCTAssertTrue(unknown.stderr.hasPrefix("homeward: error [not_found]:"), unknown.stderr)

        try await cli.run(["login", name, "--password-stdin", "--profile", "laptop"] + cli.connection, stdin: password).expectSuccess()
        try await cli.run(["logout", "--all", "--profile", "phone"]).expectSuccess()
        let afterAll = try await cli.run(["whoami", "--profile", "laptop"])
        XCTAssertNotEqual(afterAll.status, 0)
        XCTAssertTrue(afterAll.stderr.contains("[unauthenticated]"), afterAll.stderr)
    }

    func testBlockUnblockAndBlocks() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let ann = uniqueName("ann"), mal = uniqueName("mal")
        try await cli.run(["register", ann, "--password-stdin", "--profile", "ann"] + cli.connection, stdin: password).expectSuccess()
        try await cli.run(["register", mal, "--password-stdin", "--profile", "mal"] + cli.connection, stdin: password).expectSuccess()
        try await cli.run(["friends", "block", mal, "--profile", "ann"]).expectSuccess()
        let blocks = try await cli.run(["--json", "friends", "blocks", "--profile", "ann"]).expectSuccess()
        XCTAssertEqual(blocks.json.first?.array("users").compactMap { $0["username"]?.stringValue }, [mal])
        let asked = try await cli.run(["friends", "request", ann, "--profile", "mal"]).expectSuccess()
        XCTAssertTrue(asked.stdout.contains("asked \(ann)"), asked.stdout)
        let list = try await cli.run(["--json", "friends", "list", "--profile", "ann"]).expectSuccess()
        XCTAssertEqual(list.json.first?["incoming"], [], "the blocked request does not show")
        try await cli.run(["friends", "unblock", mal, "--profile", "ann"]).expectSuccess()
        let none = try await cli.run(["friends", "blocks", "--profile", "ann"]).expectSuccess()
        XCTAssertEqual(none.stdout, "you have not blocked anyone")
        let again = try await cli.run(["friends", "unblock", mal, "--profile", "ann"])
        XCTAssertTrue(again.stderr.hasPrefix("homeward: error [not_found]:"), again.stderr)
    }
}
