@testable import HomewardCLI
import Foundation
import XCTest

final class ProfileStoreTests: XCTestCase {
    func testProfilesAreReadableByTheOwnerOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-profiles-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = ProfileStore(directory: directory)
        XCTAssertEqual(try store.load("walker"), Profile())
        let profile = Profile(relay: "wss://127.0.0.1:8443/v1/ws", ca: "/tmp/ca.pem", username: "ann", token: "secret", lastAlarmId: "a_1")
        try store.save(profile, as: "walker")
        XCTAssertEqual(try store.load("walker"), profile)

        let file = try FileManager.default.attributesOfItem(atPath: store.path(of: "walker"))
        XCTAssertEqual((file[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: directory + "/profiles")
        XCTAssertEqual((folder[.posixPermissions] as? NSNumber)?.intValue, 0o700)

        XCTAssertThrowsError(try store.load("../escape"))
        XCTAssertThrowsError(try store.save(profile, as: ".hidden"))
    }

    func testConfigDirectoryFollowsTheEnvironment() {
        XCTAssertEqual(ConfigDirectory.resolve(environment: ["HOMEWARD_CONFIG_DIR": "/x", "XDG_CONFIG_HOME": "/y", "HOME": "/h"]), "/x")
        XCTAssertEqual(ConfigDirectory.resolve(environment: ["XDG_CONFIG_HOME": "/y", "HOME": "/h"]), "/y/homeward")
        XCTAssertEqual(ConfigDirectory.resolve(environment: ["HOME": "/h"]), "/h/.config/homeward")
    }

    func testShellSplitsLikeAShell() throws {
        XCTAssertEqual(try ShellTokenizer.split(#"share start --note "walking home" --invite bob,carol"#),
                       ["share", "start", "--note", "walking home", "--invite", "bob,carol"])
        XCTAssertEqual(try ShellTokenizer.split(#"panic --text "it's \"bad\"" c\ d 'x y'"#), ["panic", "--text", #"it's "bad""#, "c d", "x y"])
        XCTAssertEqual(try ShellTokenizer.split("  "), [])
        XCTAssertThrowsError(try ShellTokenizer.split("panic --text 'open"))
    }
}
