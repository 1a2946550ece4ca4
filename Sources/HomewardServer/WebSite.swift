import Foundation
import NIOCore
import NIOHTTP1

/// An HTTP answer before the connection-level headers (Content-Length, Connection) are added.
struct HTTPAnswer {
    var status: HTTPResponseStatus
    var headers = HTTPHeaders()
    var body: ByteBuffer

    init(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") {
        self.status = status
        self.body = ByteBuffer(string: text)
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Cache-Control", value: "no-store")
    }
}

/// The web app's routes: `/` and `/f` (the pages), `/sw.js` (its service worker, at the root so that
/// its scope is the whole app), `/static/...` (the app's scripts and styles),
/// `/vendor/leaflet/...` (Debian's Leaflet), `/tiles/...` (`VectorTileRoute`) and `/v1/web-config` (what the page needs to draw its map).
/// A value with no I/O: `HTTPHandler` asks it for an answer; unit tests do the same.
struct WebSite: Sendable {
    let assets: WebAssets
    let tiles: MapTiles?
    let vectorTiles: VectorTileRoute?
    private let config: ByteBuffer

    static let configPath = "/v1/web-config"

    init(assets: WebAssets, tiles: MapTiles?, vectorTiles: VectorTileRoute? = nil) {
        self.assets = assets
        self.tiles = tiles
        self.vectorTiles = vectorTiles
        var object: [String: Any] = ["leaflet": assets.hasLeaflet ? [
            "script": WebAssets.leafletPrefix + "leaflet.js", "stylesheet": WebAssets.leafletPrefix + "leaflet.css",
        ] : NSNull()]
        object["tiles"] = tiles.map { ["url": $0.urlTemplate, "attribution": $0.attribution] } ?? NSNull()
        // Only with --map-tiles-mbtiles: pages of a relay without it see the same config as before.
        if let vectorTiles { object["vectorTiles"] = vectorTiles.config }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        config = ByteBuffer(bytes: data)
    }

    /// Whether `path` names something this site serves (then other methods get 405, not 404).
    func serves(_ path: String) -> Bool {
        path == Self.configPath || assets.files[path] != nil || vectorTiles?.serves(path) == true
    }

    /// The answer to a GET or HEAD of `path` (the caller drops the body for HEAD).
    func answer(path: String, headers request: HTTPHeaders) -> HTTPAnswer {
        if path == Self.configPath {
            var answer = HTTPAnswer(.ok, "", contentType: "application/json")
            answer.body = config
            return answer
        }
        if let vectorTiles, vectorTiles.serves(path) { return vectorTiles.answer(path: path) }
        guard let asset = assets.files[path] else {
            return HTTPAnswer(.notFound, "not found\n")
        }
        var answer = HTTPAnswer(.ok, "", contentType: asset.contentType)
        answer.headers.replaceOrAdd(name: "Cache-Control", value: Self.cachePolicy(for: path))
        answer.headers.add(name: "ETag", value: asset.etag)
        if request[canonicalForm: "If-None-Match"].contains(where: { $0 == "*" || $0 == Substring(asset.etag) }) {
            answer.status = .notModified
            return answer
        }
        answer.body = asset.body
        return answer
    }

    /// Leaflet changes only with a Debian package upgrade: cache it for a day. The app's own files keep
    /// their names across releases, so the browser revalidates them (cheaply, by ETag) each time.
    static func cachePolicy(for path: String) -> String {
        path.hasPrefix(WebAssets.leafletPrefix) ? "public, max-age=86400" : "no-cache"
    }
}
