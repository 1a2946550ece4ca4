import Foundation
@testable import HomewardServer
import XCTest

/// Reading the app and Leaflet from disk, and the settings that describe a tile server.
final class WebAssetsTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("web-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("app/static/js"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("leaflet/images"), withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func write(_ path: String, _ text: String) throws {
        try Data(text.utf8).write(to: directory.appendingPathComponent(path))
    }

    func testTheCheckoutsWebAppLoadsWithItsPagesAndScripts() throws {
        let root = try XCTUnwrap(WebConfiguration.defaultWebRoot(executablePath: nil), "web/ of the checkout")
        let assets = try WebAssets.load(webRoot: root, leafletDirectory: nil)
        XCTAssertEqual(assets.files["/"]?.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(assets.files["/f"]?.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(assets.files["/static/js/app.js"]?.contentType, "text/javascript; charset=utf-8")
        XCTAssertFalse(assets.hasLeaflet)
        // No inline script in the pages: the CSP would block it.
        for page in ["/", "/f"] {
            let html = String(buffer: try XCTUnwrap(assets.files[page]).body)
            for tag in html.components(separatedBy: "<script").dropFirst() {
                XCTAssertTrue(tag.hasPrefix(" type=\"module\" src=\"/static/") || tag.hasPrefix(" src=\"/static/"), "\(page): <script\(tag.prefix(60))")
            }
            XCTAssertNil(html.range(of: #"\son[a-z]+\s*="#, options: .regularExpression), "\(page): inline event handler")
        }
    }

    func testLeafletIsServedUnderVendorAndOnlyKnownTypes() throws {
        try write("app/index.html", "i")
        try write("app/f.html", "f")
        try write("app/static/js/app.js", "a")
        try write("leaflet/leaflet.js", "L")
        try write("leaflet/leaflet.css", "c")
        try write("leaflet/leaflet.js.gz", "zip")
        try write("leaflet/images/marker.png", "png")
        try write("leaflet/.hidden.js", "h")
        let assets = try WebAssets.load(webRoot: directory.appendingPathComponent("app").path,
                                        leafletDirectory: directory.appendingPathComponent("leaflet").path)
        XCTAssertTrue(assets.hasLeaflet)
        XCTAssertEqual(Set(assets.files.keys), ["/", "/f", "/static/js/app.js", "/vendor/leaflet/leaflet.js",
                                                "/vendor/leaflet/leaflet.css", "/vendor/leaflet/images/marker.png"])
        XCTAssertEqual(assets.files["/vendor/leaflet/images/marker.png"]?.contentType, "image/png")
    }

    func testTheServiceWorkerIsServedFromTheRootOnlyWhenTheWebRootHasOne() throws {
        try write("app/index.html", "i")
        try write("app/f.html", "f")
        let app = directory.appendingPathComponent("app").path
        XCTAssertNil(try WebAssets.load(webRoot: app, leafletDirectory: nil).files["/sw.js"])
        try write("app/sw.js", "self.addEventListener('push', () => {});")
        let worker = try XCTUnwrap(try WebAssets.load(webRoot: app, leafletDirectory: nil).files["/sw.js"])
        XCTAssertEqual(worker.contentType, "text/javascript; charset=utf-8")
        XCTAssertEqual(String(buffer: worker.body), "self.addEventListener('push', () => {});")
        // The checkout's app has one, and the policy lets only the relay's own scripts be workers.
        let root = try XCTUnwrap(WebConfiguration.defaultWebRoot(executablePath: nil), "web/ of the checkout")
        XCTAssertNotNil(try WebAssets.load(webRoot: root, leafletDirectory: nil).files["/sw.js"])
        XCTAssertTrue(SecurityHeaders(tileSource: nil).contentSecurityPolicy(host: nil).contains("worker-src 'self';"))
    }

    func testAMissingLeafletDirectoryMeansTheOwnMap() throws {
        try write("app/index.html", "i")
        try write("app/f.html", "f")
        let assets = try WebAssets.load(webRoot: directory.appendingPathComponent("app").path,
                                        leafletDirectory: directory.appendingPathComponent("nowhere").path)
        XCTAssertFalse(assets.hasLeaflet)
    }

    func testAWebRootWithoutItsPagesIsAStartupError() throws {
        XCTAssertThrowsError(try WebAssets.load(webRoot: directory.appendingPathComponent("leaflet").path, leafletDirectory: nil)) { error in
            XCTAssertTrue("\(error)".contains("index.html"), "\(error)")
        }
    }

    func testETagsDifferWhenTheBytesDo() {
        XCTAssertNotEqual(WebAssets.etag(of: Array("a".utf8)), WebAssets.etag(of: Array("b".utf8)))
        XCTAssertEqual(WebAssets.etag(of: Array("a".utf8)), WebAssets.etag(of: Array("a".utf8)))
    }

    func testMapTilesBecomeOneImageSource() throws {
        XCTAssertEqual(try MapTiles(urlTemplate: "https://tile.example.org/{z}/{x}/{y}.png", attribution: "x").cspSource,
                       "https://tile.example.org")
        XCTAssertEqual(try MapTiles(urlTemplate: "https://{s}.tile.example.org:8080/{z}/{x}/{y}.png", attribution: "").cspSource,
                       "https://*.tile.example.org:8080")
    }

    func testMapTilesThatCouldBreakThePolicyAreRefused() {
        for template in ["tile.example.org/{z}/{x}/{y}.png", "ftp://t.example/{z}/{x}/{y}", "https://t.example/{z}/{x}.png",
                         "https://t.example; script-src */{z}/{x}/{y}", "https://t.example/{z}/{x}/{y}.png 'unsafe-inline'",
                         "https://{z}.example/{z}/{x}/{y}", "https:///{z}/{x}/{y}", "https://t.example/{z}/{x}/{y},x"] {
            XCTAssertThrowsError(try MapTiles(urlTemplate: template, attribution: ""), template)
        }
        XCTAssertThrowsError(try MapTiles(urlTemplate: "https://t.example/{z}/{x}/{y}", attribution: "a\nb"))
    }

    func testRequestPathsAreDecodedOrRefused() {
        XCTAssertEqual(RequestPath(uri: "/static/a%20b.js?x=1#frag"), .path("/static/a b.js"))
        XCTAssertEqual(RequestPath(uri: "/f#TOKEN"), .path("/f"))
        XCTAssertEqual(RequestPath(uri: "/%2e%2e/x"), .invalid)
        XCTAssertEqual(RequestPath(uri: "/%ff"), .invalid)
        XCTAssertEqual(RequestPath(uri: "/" + String(repeating: "x", count: RequestPath.maxBytes)), .tooLong)
    }
}
