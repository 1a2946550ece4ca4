@testable import HomewardCore
import XCTest

/// A login for an unknown username must cost what a wrong password costs: the same PBKDF2 work.
final class PasswordHasherTests: XCTestCase {
    private let hasher = PasswordHasher(iterations: PasswordHasher.minimumIterations)

    func testUnknownUserIsCheckedAgainstAHashWithTheSameParametersAsAStoredOne() throws {
        let real = try XCTUnwrap(PasswordHasher.Encoded(hasher.hash("correct horse")))
        let dummy = try XCTUnwrap(PasswordHasher.Encoded(hasher.dummyHash), "the dummy hash is a well-formed stored hash")
        XCTAssertEqual(dummy.rounds, real.rounds, "same PBKDF2 iteration count as verifying a real hash")
        XCTAssertEqual(dummy.rounds, hasher.iterations)
        XCTAssertEqual(dummy.salt.count, real.salt.count)
        XCTAssertEqual(dummy.key.count, real.key.count, "same key length: the comparison runs over as many bytes")
        XCTAssertNotEqual(dummy.salt, [UInt8](repeating: 0, count: dummy.salt.count), "a random salt, not zeros")
    }

    func testBurnNeverMatches() {
        XCTAssertFalse(hasher.burn("correct horse"))
        XCTAssertFalse(hasher.burn(""))
    }

    func testEachHasherHasItsOwnDummy() {
        XCTAssertNotEqual(hasher.dummyHash, PasswordHasher(iterations: PasswordHasher.minimumIterations).dummyHash)
    }

    func testVerifyStillAcceptsTheRightPasswordOnly() {
        let stored = hasher.hash("correct horse")
        XCTAssertTrue(hasher.verify("correct horse", against: stored))
        XCTAssertFalse(hasher.verify("correct horsE", against: stored))
        XCTAssertFalse(hasher.verify("correct horse", against: "pbkdf2-sha256$0$AAAA$AAAA"), "zero rounds is not a hash")
        XCTAssertFalse(hasher.verify("correct horse", against: "garbage"))
    }
}
