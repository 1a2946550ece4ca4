import Foundation
import XCTest

/// Every folder under Tests/ is a target in Package.swift. SwiftPM ignores a folder no target names, so
/// tests put in one (an old target's folder, after a merge) would compile nowhere and run never, silently.
final class TestLayoutTests: XCTestCase {
    func testEveryFolderUnderTestsIsATarget() throws {
        let root = ArchitectureMap.repositoryRoot
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let folders = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Tests").path)
            .filter { !$0.hasPrefix(".") }
        XCTAssertFalse(folders.isEmpty)
        let unnamed = folders.filter { folder in
            !manifest.contains("name: \"\(folder)\"") && !manifest.contains("path: \"Tests/\(folder)\"")
        }
        XCTAssertEqual(unnamed.sorted(), [], "folders under Tests/ that no target in Package.swift builds")
    }
}
