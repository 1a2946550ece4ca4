import Foundation
import HomewardProtocol
import XCTest

/// `register` and `login` ask for the password before they connect: a person who takes longer to type
/// it (twice) than the relay's sign-in timeout must not get "not connected to the relay".
final class CLIPasswordPromptTests: XCTestCase {
    func testRegisterAndLoginWaitForASlowTypistBeforeConnecting() async throws {
        let relay = try await LoopbackRelay.start { $0.limits.authenticationTimeout = 1 }
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let name = uniqueName("slow")

        for arguments in [["register", name, "--profile", "slow"], ["login", name, "--profile", "slow"]] {
            let process = try cli.start(arguments + ["--password-stdin"] + cli.connection, holdStdin: true)
            // The typist: slower than the relay's 1 s sign-in timeout. Waiting is the scenario here, not synchronisation.
            try await Task.sleep(for: .seconds(2.5))
            process.type("correct horse\n")
            let status = try await process.exitStatus()
            XCTAssertEqual(status, 0, "\(arguments[0]): \(process.stderr)")
        }
    }
}
