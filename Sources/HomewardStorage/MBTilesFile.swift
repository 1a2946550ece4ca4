import Foundation
import GRDB

/// The vector tiles of an MBTiles file (Mapbox Vector Tiles in SQLite, as tilemaker writes them), read
/// whole at start so that serving a tile is a dictionary lookup, never a disk read on an event loop.
/// A city's file is tens of megabytes; `maximumBytes` refuses one that would not fit comfortably.
public struct MBTilesFile: Sendable {
    /// A tile's address in the web's XYZ scheme (y counted from the north; MBTiles counts from the south).
    public struct Address: Hashable, Sendable {
        public let z: Int
        public let x: Int
        public let y: Int

        public init(z: Int, x: Int, y: Int) {
            self.z = z
            self.x = x
            self.y = y
        }
    }

    public let minZoom: Int
    public let maxZoom: Int
    /// The `attribution` metadata, when the file has one.
    public let attribution: String?
    /// Each tile's bytes as stored: gzip'd or plain protobuf.
    public let tiles: [Address: [UInt8]]

    public static let maximumBytes = 1 << 30

    /// Opens `path` read-only and reads every tile; throws when the file is missing, not SQLite, not
    /// MBTiles, not vector tiles (`metadata` format other than pbf) or too big.
    public static func load(path: String, maximumBytes: Int = MBTilesFile.maximumBytes) throws(MBTilesError) -> MBTilesFile {
        guard FileManager.default.isReadableFile(atPath: path) else { throw .missing(path) }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "mbtiles"
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db throws -> MBTilesFile in
                guard try db.tableExists("metadata"), try db.tableExists("tiles") || db.viewExists("tiles") else {
                    throw MBTilesError.notMBTiles(path)
                }
                var metadata: [String: String] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT name, value FROM metadata") {
                    if let name = row["name"] as String?, let value = row["value"] as String? { metadata[name] = value }
                }
                guard metadata["format"] == "pbf" else {
                    throw MBTilesError.notVectorTiles(path, format: metadata["format"])
                }
                let total = try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(LENGTH(tile_data)), 0) FROM tiles") ?? 0
                guard total <= maximumBytes else { throw MBTilesError.tooBig(path, bytes: total, limit: maximumBytes) }
                var tiles: [Address: [UInt8]] = [:]
                let rows = try Row.fetchCursor(db, sql: "SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")
                while let row = try rows.next() {
                    let z: Int = row["zoom_level"], x: Int = row["tile_column"], tmsRow: Int = row["tile_row"]
                    guard (0...30).contains(z), (0..<(1 << z)).contains(x), (0..<(1 << z)).contains(tmsRow),
                          let data = row["tile_data"] as Data? else { continue }
                    tiles[Address(z: z, x: x, y: (1 << z) - 1 - tmsRow)] = [UInt8](data)
                }
                let zooms = tiles.keys.map(\.z)
                guard let lowest = zooms.min(), let highest = zooms.max() else { throw MBTilesError.empty(path) }
                return MBTilesFile(minZoom: Int(metadata["minzoom"] ?? "") ?? lowest, maxZoom: Int(metadata["maxzoom"] ?? "") ?? highest,
                                   attribution: metadata["attribution"], tiles: tiles)
            }
        } catch let error as MBTilesError {
            throw error
        } catch {
            throw .unreadable(path, reason: (error as? DatabaseError)?.message ?? "\(error)")
        }
    }
}

public enum MBTilesError: Error, CustomStringConvertible, Equatable {
    case missing(String)
    case unreadable(String, reason: String)
    case notMBTiles(String)
    case notVectorTiles(String, format: String?)
    case empty(String)
    case tooBig(String, bytes: Int, limit: Int)

    public var description: String {
        switch self {
        case .missing(let path):
            return "map-tiles-mbtiles: \(path) does not exist or is not readable"
        case .unreadable(let path, let reason):
            return "map-tiles-mbtiles: \(path) is not a readable SQLite file (\(reason))"
        case .notMBTiles(let path):
            return "map-tiles-mbtiles: \(path) is not an MBTiles file (no metadata and tiles tables)"
        case .notVectorTiles(let path, let format):
            return "map-tiles-mbtiles: \(path) holds \(format.map { "'\($0)'" } ?? "unlabelled") tiles, not vector tiles (metadata format must be pbf; make the file with tilemaker, see deploy/README.md)"
        case .empty(let path):
            return "map-tiles-mbtiles: \(path) has no tiles"
        case .tooBig(let path, let bytes, let limit):
            return "map-tiles-mbtiles: \(path) holds \(bytes) bytes of tiles, more than the \(limit) the relay keeps in memory (use a smaller extract)"
        }
    }
}
