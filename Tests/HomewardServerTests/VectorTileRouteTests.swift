import Foundation
import GRDB
@testable import HomewardServer
import HomewardStorage
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// `--map-tiles-mbtiles`: an MBTiles file read at start, its tiles served at /tiles/{z}/{x}/{y}.pbf
/// (XYZ, while the file counts rows from the south), and the files the relay refuses to start with.
/// The files here are written with GRDB; the browser tests serve tiles tilemaker made.
final class VectorTileRouteTests: XCTestCase {
    private var directory: URL!
    private var channel: EmbeddedChannel?

    /// The start of a gzip stream, then anything: the route looks at the magic bytes only.
    private static let gzipped: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 1, 2, 3, 4]
    /// A protobuf tile that is not compressed: one empty layer named "x".
    private static let plain: [UInt8] = [0x1A, 0x03, 0x0A, 0x01, 0x78]

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mbtiles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        _ = try? channel?.finish()
        try? FileManager.default.removeItem(at: directory)
    }

    /// An MBTiles file with `metadata` (when `format` is given) and these tiles (z, x, TMS row, bytes).
    private func mbtiles(_ name: String = "city.mbtiles", format: String? = "pbf", metadata: [String: String] = [:],
                         tiles: [(Int, Int, Int, [UInt8])]) throws -> String {
        let path = directory.appendingPathComponent(name).path
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE metadata (name TEXT, value TEXT)")
            try db.execute(sql: "CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)")
            var entries = metadata
            if let format { entries["format"] = format }
            for (key, value) in entries { try db.execute(sql: "INSERT INTO metadata VALUES (?, ?)", arguments: [key, value]) }
            for (z, x, row, bytes) in tiles {
                try db.execute(sql: "INSERT INTO tiles VALUES (?, ?, ?, ?)", arguments: [z, x, row, Data(bytes)])
            }
        }
        try queue.close()
        return path
    }

    private func handler(for path: String) throws -> EmbeddedChannel {
        let route = try XCTUnwrap(VectorTileRoute.load(path, logger: .init(label: "test")))
        let site = WebSite(assets: WebAssets(["/": ("text/html; charset=utf-8", "app")]), tiles: nil, vectorTiles: route)
        let channel = EmbeddedChannel(handler: HTTPHandler(metrics: { [] }, site: site))
        self.channel = channel
        return channel
    }

    private func get(_ uri: String, on channel: EmbeddedChannel, method: HTTPMethod = .GET) throws -> (HTTPResponseHead, [UInt8]) {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        head.headers.add(name: "Host", value: "relay.example:8443")
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        var response: HTTPResponseHead?
        var body: [UInt8] = []
        while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
            switch part {
            case .head(let head): response = head
            case .body(.byteBuffer(let buffer)): body += Array(buffer.readableBytesView)
            case .body: XCTFail("unexpected file region")
            case .end: break
            }
        }
        return (try XCTUnwrap(response, "no response to \(uri)"), body)
    }

    func testATileIsServedAtItsXYZAddressWithGzipEncodingAndCacheHeaders() throws {
        // TMS row 11565 at zoom 14 is XYZ y 16383 - 11565 = 4818.
        let channel = try handler(for: try mbtiles(tiles: [(14, 9013, 11565, Self.gzipped)]))
        let (head, body) = try get("/tiles/14/9013/4818.pbf", on: channel)
        XCTAssertEqual(head.status, .ok)
        XCTAssertEqual(body, Self.gzipped)
        XCTAssertEqual(head.headers.first(name: "Content-Encoding"), "gzip")
        XCTAssertEqual(head.headers.first(name: "Content-Type"), "application/vnd.mapbox-vector-tile")
        XCTAssertEqual(head.headers.first(name: "Cache-Control"), "public, max-age=3600")
        XCTAssertEqual(head.headers.first(name: "Content-Length"), String(Self.gzipped.count))
        // The file's own row number is not a web address.
        XCTAssertEqual(try get("/tiles/14/9013/11565.pbf", on: channel).0.status, .notFound)
    }

    func testAnUncompressedTileHasNoContentEncoding() throws {
        let channel = try handler(for: try mbtiles(tiles: [(0, 0, 0, Self.plain)]))
        let (head, body) = try get("/tiles/0/0/0.pbf", on: channel)
        XCTAssertEqual(head.status, .ok)
        XCTAssertEqual(body, Self.plain)
        XCTAssertNil(head.headers.first(name: "Content-Encoding"))
    }

    func testTilesOutsideTheFileAndMalformedAddressesAre404() throws {
        let channel = try handler(for: try mbtiles(tiles: [(14, 9013, 11565, Self.gzipped), (13, 4506, 5782, Self.gzipped)]))
        for uri in ["/tiles/15/18026/9636.pbf", "/tiles/12/2253/1204.pbf", "/tiles/14/9014/4818.pbf", "/tiles/14/9013/4818.png",
                    "/tiles/14/9013.pbf", "/tiles/14/9013/4818/1.pbf", "/tiles/-1/0/0.pbf", "/tiles/14/99999999999/0.pbf",
                    "/tiles/31/0/0.pbf", "/tiles/1/2/0.pbf", "/tiles/"] {
            XCTAssertEqual(try get(uri, on: channel).0.status, .notFound, uri)
        }
        XCTAssertEqual(try get("/tiles/14/9013/4818.pbf", on: channel, method: .POST).0.status, .methodNotAllowed)
        XCTAssertEqual(try get("/tiles/13/4506/2409.pbf", on: channel).0.status, .ok)
    }

    func testTheWebConfigNamesTheTilesZoomRangeAndAttributionAndTheCSPStaysOnTheRelay() throws {
        let path = try mbtiles(metadata: ["minzoom": "10", "maxzoom": "14", "attribution": "© OSM test"],
                               tiles: [(14, 9013, 11565, Self.gzipped)])
        let channel = try handler(for: path)
        let (head, body) = try get("/v1/web-config", on: channel)
        let config = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let tiles = try XCTUnwrap(config["vectorTiles"] as? [String: Any])
        XCTAssertEqual(tiles["url"] as? String, "/tiles/{z}/{x}/{y}.pbf")
        XCTAssertEqual(tiles["minZoom"] as? Int, 10)
        XCTAssertEqual(tiles["maxZoom"] as? Int, 14)
        XCTAssertEqual(tiles["attribution"] as? String, "© OSM test")
        XCTAssertTrue(config["tiles"] is NSNull)
        let without = WebSite(assets: WebAssets(["/": ("text/html; charset=utf-8", "app")]), tiles: nil)
        XCTAssertNil(try XCTUnwrap(JSONSerialization.jsonObject(with: Data(buffer: without.answer(path: "/v1/web-config", headers: [:]).body)) as? [String: Any])["vectorTiles"])
        let csp = try XCTUnwrap(head.headers.first(name: "Content-Security-Policy"))
        XCTAssertTrue(csp.contains("img-src 'self';"), csp)
        XCTAssertTrue(csp.contains("connect-src 'self' wss://relay.example:8443;"), csp)
    }

    func testWithoutAnAttributionTheFileNamesOpenStreetMapsAndTheZoomsComeFromTheTiles() throws {
        let file = try MBTilesFile.load(path: try mbtiles(tiles: [(12, 0, 0, Self.plain), (14, 0, 0, Self.plain)]))
        let route = VectorTileRoute(file)
        XCTAssertEqual([route.minZoom, route.maxZoom], [12, 14])
        XCTAssertEqual(route.attribution, "© OpenStreetMap contributors")
    }

    func testTheRelayRefusesAMissingCorruptRasterEmptyOrOversizedFile() throws {
        let missing = directory.appendingPathComponent("nowhere.mbtiles").path
        XCTAssertThrowsError(try MBTilesFile.load(path: missing)) { XCTAssertEqual($0 as? MBTilesError, .missing(missing)) }

        let corrupt = directory.appendingPathComponent("corrupt.mbtiles")
        try Data(repeating: 0x42, count: 4096).write(to: corrupt)
        XCTAssertThrowsError(try MBTilesFile.load(path: corrupt.path)) { error in
            guard case .unreadable(let path, _) = error as? MBTilesError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, corrupt.path)
            XCTAssertTrue("\(error)".contains("not a readable SQLite file"), "\(error)")
        }

        let other = directory.appendingPathComponent("other.sqlite").path
        let queue = try DatabaseQueue(path: other)
        try queue.write { try $0.execute(sql: "CREATE TABLE users (name TEXT)") }
        try queue.close()
        XCTAssertThrowsError(try MBTilesFile.load(path: other)) { XCTAssertEqual($0 as? MBTilesError, .notMBTiles(other)) }

        let raster = try mbtiles("raster.mbtiles", format: "png", tiles: [(0, 0, 0, [0x89, 0x50])])
        XCTAssertThrowsError(try MBTilesFile.load(path: raster)) { error in
            XCTAssertEqual(error as? MBTilesError, .notVectorTiles(raster, format: "png"))
            XCTAssertTrue("\(error)".contains("not vector tiles"), "\(error)")
        }
        let unlabelled = try mbtiles("unlabelled.mbtiles", format: nil, tiles: [(0, 0, 0, Self.plain)])
        XCTAssertThrowsError(try MBTilesFile.load(path: unlabelled)) { XCTAssertEqual($0 as? MBTilesError, .notVectorTiles(unlabelled, format: nil)) }

        let empty = try mbtiles("empty.mbtiles", tiles: [])
        XCTAssertThrowsError(try MBTilesFile.load(path: empty)) { XCTAssertEqual($0 as? MBTilesError, .empty(empty)) }

        let big = try mbtiles("big.mbtiles", tiles: [(0, 0, 0, Self.gzipped), (1, 0, 0, Self.gzipped)])
        XCTAssertThrowsError(try MBTilesFile.load(path: big, maximumBytes: 10)) {
            XCTAssertEqual($0 as? MBTilesError, .tooBig(big, bytes: 16, limit: 10))
        }
        // Opened read-only: refusing a file never changes it.
        XCTAssertEqual(try Data(contentsOf: corrupt), Data(repeating: 0x42, count: 4096))
    }
}
