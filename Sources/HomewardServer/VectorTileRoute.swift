import HomewardStorage
import Logging
import NIOCore

/// `/tiles/{z}/{x}/{y}.pbf`: the street tiles of `--map-tiles-mbtiles`, served from memory (read whole
/// at start by `MBTilesFile`), so the page's map asks nobody but the relay. Tiles outside the file
/// (another zoom, another place) are 404: the page then draws what it has.
struct VectorTileRoute: Sendable {
    let minZoom: Int
    let maxZoom: Int
    let attribution: String
    private let tiles: [MBTilesFile.Address: Tile]

    static let prefix = "/tiles/"
    static let urlTemplate = "/tiles/{z}/{x}/{y}.pbf"
    /// OpenStreetMap's licence asks for this when the file names no attribution of its own.
    static let defaultAttribution = "© OpenStreetMap contributors"

    private struct Tile: Sendable {
        let body: ByteBuffer
        let gzipped: Bool
    }

    init(_ file: MBTilesFile) {
        minZoom = file.minZoom
        maxZoom = file.maxZoom
        attribution = file.attribution ?? Self.defaultAttribution
        tiles = file.tiles.mapValues { bytes in
            Tile(body: ByteBuffer(bytes: bytes), gzipped: bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B)
        }
    }

    /// What the page needs to draw the tiles (in `/v1/web-config`).
    var config: [String: Any] {
        ["url": Self.urlTemplate, "minZoom": minZoom, "maxZoom": maxZoom, "attribution": attribution]
    }

    func serves(_ path: String) -> Bool {
        path.hasPrefix(Self.prefix)
    }

    func answer(path: String) -> HTTPAnswer {
        guard let address = Self.address(path), let tile = tiles[address] else {
            return HTTPAnswer(.notFound, "no such tile\n")
        }
        var answer = HTTPAnswer(.ok, "", contentType: "application/vnd.mapbox-vector-tile")
        // The file changes only when the operator replaces it and restarts the relay.
        answer.headers.replaceOrAdd(name: "Cache-Control", value: "public, max-age=3600")
        if tile.gzipped { answer.headers.add(name: "Content-Encoding", value: "gzip") }
        answer.body = tile.body
        return answer
    }

    /// `/tiles/Z/X/Y.pbf` with decimal numbers in range, else nil.
    static func address(_ path: String) -> MBTilesFile.Address? {
        guard path.hasPrefix(prefix), path.hasSuffix(".pbf") else { return nil }
        let parts = path.dropFirst(prefix.count).dropLast(4).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ (1...10).contains($0.count) && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let z = Int(parts[0]), let x = Int(parts[1]), let y = Int(parts[2]),
              z <= 30, x < 1 << z, y < 1 << z else { return nil }
        return MBTilesFile.Address(z: z, x: x, y: y)
    }
}

extension VectorTileRoute {
    /// Reads `path` (when given) before the relay listens; a file the relay cannot serve stops it.
    static func load(_ path: String?, logger: Logger) throws(MBTilesError) -> VectorTileRoute? {
        guard let path else { return nil }
        let route = VectorTileRoute(try MBTilesFile.load(path: path))
        logger.info("serving vector tiles", metadata: [
            "mbtiles": "\(path)", "tiles": "\(route.tiles.count)", "zoom": "\(route.minZoom)-\(route.maxZoom)",
        ])
        return route
    }
}
