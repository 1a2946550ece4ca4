import Foundation
import GRDB
import HomewardTestSupport
import XCTest

/// `--map-tiles-mbtiles` on the real executable: a file the relay cannot serve as vector tiles stops it
/// at start-up, naming the file and what is wrong with it, before it listens.
final class MapTilesFlagTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-mbtiles-flag-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func runRelay(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try runToEnd(RelayProcess.executable(),
                     ["--host", "127.0.0.1", "--port", "0", "--data-dir", directory.appendingPathComponent("data").path] + arguments,
                     environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func testAMissingCorruptOrRasterFileIsAStartupError() throws {
        let missing = directory.appendingPathComponent("missing.mbtiles").path
        let corrupt = directory.appendingPathComponent("corrupt.mbtiles")
        try Data("SQLite format 3\0".utf8 + Data(repeating: 0xFF, count: 4000)).write(to: corrupt)
        let raster = directory.appendingPathComponent("raster.mbtiles").path
        let queue = try DatabaseQueue(path: raster)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE metadata (name TEXT, value TEXT); INSERT INTO metadata VALUES ('format', 'png')")
            try db.execute(sql: "CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)")
            try db.execute(sql: "INSERT INTO tiles VALUES (0, 0, 0, x'89504e47')")
        }
        try queue.close()
        let cases: [([String], [String: String], String)] = [
            (["--map-tiles-mbtiles", missing], [:], "map-tiles-mbtiles: \(missing) does not exist"),
            ([], ["HOMEWARD_MAP_TILES_MBTILES": corrupt.path], "map-tiles-mbtiles: \(corrupt.path) is not a readable SQLite file"),
            (["--map-tiles-mbtiles", raster], [:], "map-tiles-mbtiles: \(raster) holds 'png' tiles, not vector tiles"),
        ]
        for (arguments, environment, expected) in cases {
            let (status, output) = try runRelay(arguments, environment: environment)
            XCTAssertNotEqual(status, 0, "\(arguments) \(environment)")
            XCTAssertTrue(output.contains(expected), "\(arguments) \(environment): \(output)")
            XCTAssertFalse(output.contains("listening"), output)
        }
    }

    func testHelpExplainsTheFlag() throws {
        let (status, output) = try runRelay(["--help"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(output.contains("--map-tiles-mbtiles <file>"), output)
    }
}
