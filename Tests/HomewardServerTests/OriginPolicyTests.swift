@testable import HomewardServer
import XCTest

/// Origins as browsers send them and operators list them.
final class OriginPolicyTests: XCTestCase {
    func testOriginsAreLowercasedWithoutDefaultPortsOrPaths() {
        XCTAssertEqual(WebOrigin.normalize("HTTPS://Relay.Example.org"), "https://relay.example.org")
        XCTAssertEqual(WebOrigin.normalize("https://relay.example.org:443"), "https://relay.example.org")
        XCTAssertEqual(WebOrigin.normalize("http://relay.example.org:80/"), "http://relay.example.org")
        XCTAssertEqual(WebOrigin.normalize("https://relay.example.org:8443/homeward/f"), "https://relay.example.org:8443")
        XCTAssertEqual(WebOrigin.normalize("https://[::1]:8443"), "https://[::1]:8443")
        XCTAssertEqual(WebOrigin.normalize("https://127.0.0.1:8443"), "https://127.0.0.1:8443")
    }

    func testWhatIsNoOriginIsRefused() {
        for text in ["null", "", "relay.example.org", "ftp://relay.example.org", "https://", "https://:8443",
                     "https://relay.example.org:0", "https://relay.example.org:99999", "https://user@relay.example.org",
                     "https://[::1", "https://relay.example.org:port"] {
            XCTAssertNil(WebOrigin.normalize(text), text)
        }
    }

    func testAPolicyAdmitsNoOriginAndTheListedOnesOnly() {
        let policy = OriginPolicy(["https://relay.example.org:8443"])
        XCTAssertTrue(policy.admits([]))
        XCTAssertTrue(policy.admits(["https://relay.example.org:8443"]))
        XCTAssertFalse(policy.admits(["https://relay.example.org"]))
        XCTAssertFalse(policy.admits(["https://relay.example.org:8443", "https://evil.example"]))
        policy.allow(["https://evil.example"])
        XCTAssertTrue(policy.admits(["https://evil.example"]))
    }
}
