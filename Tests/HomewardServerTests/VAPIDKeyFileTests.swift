import Foundation
@testable import HomewardServer
import HomewardWebPush
import XCTest

/// The VAPID key is made once in the data directory, readable by its owner only, and kept.
final class VAPIDKeyFileTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-vapid-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testTheFirstStartMakesAKeyOnlyItsOwnerCanReadAndLaterStartsKeepIt() throws {
        let first = try VAPIDKeyFile.load(path: nil, dataDirectory: directory)
        let path = directory + "/vapid-key.pem"
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual(try VAPIDKeyFile.load(path: nil, dataDirectory: directory).publicKeyBase64URL, first.publicKeyBase64URL)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["vapid-key.pem"], "no temporary file left")
    }

    func testAnOperatorKeyIsUsedAndABadOneStopsTheStartWithItsPath() throws {
        let key = VAPIDKey.generate()
        let path = directory + "/operator.pem"
        try key.pem.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertEqual(try VAPIDKeyFile.load(path: path, dataDirectory: directory).publicKeyBase64URL, key.publicKeyBase64URL)

        try "not a key".write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try VAPIDKeyFile.load(path: path, dataDirectory: directory)) { error in
            XCTAssertTrue("\(error)".contains(path) && "\(error)".contains("PEM"), "\(error)")
        }
        XCTAssertThrowsError(try VAPIDKeyFile.load(path: directory + "/missing.pem", dataDirectory: directory)) { error in
            XCTAssertTrue("\(error)".contains("missing.pem"), "\(error)")
        }
    }
}
