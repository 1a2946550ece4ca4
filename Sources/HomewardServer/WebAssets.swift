import Foundation
import NIOCore

/// The web app's files, read into memory once at start, keyed by the URL path that serves them.
///
/// Serving from memory keeps file I/O off the event loops, and makes path traversal impossible by
/// construction: only paths found while walking the two directories at start exist.
public struct WebAssets: Sendable {
    public struct Asset: Sendable {
        public let body: ByteBuffer
        public let contentType: String
        /// A strong validator (a hash of the bytes), for `If-None-Match`.
        public let etag: String
    }

    public private(set) var files: [String: Asset] = [:]
    /// Whether Leaflet's files were found (the page then loads it from `/vendor/leaflet/leaflet.js`).
    public var hasLeaflet: Bool { files[Self.leafletPrefix + "leaflet.js"] != nil }

    public static let staticPrefix = "/static/"
    public static let leafletPrefix = "/vendor/leaflet/"
    public static let serviceWorkerPath = "/sw.js"
    /// A misconfigured root (`--web-root /`) must not read the whole disk into memory.
    static let maxTotalBytes = 32 * 1024 * 1024
    static let maxFiles = 2000

    public init() {}

    /// In-memory files (tests): path → (content type, body).
    public init(_ entries: [String: (String, String)]) {
        for (path, (type, text)) in entries { add(path, Array(text.utf8), contentType: type) }
    }

    /// Reads the app from `webRoot` (`index.html` at `/`, `f.html` at `/f`, `static/` at `/static/`, and
    /// the service worker `sw.js` at `/sw.js` when there is one: served from the root, its scope is the
    /// whole app) and Leaflet from `leafletDirectory` at `/vendor/leaflet/`. A missing Leaflet directory
    /// is not an error.
    public static func load(webRoot: String, leafletDirectory: String?) throws(WebAssetsError) -> WebAssets {
        var assets = WebAssets()
        var budget = Budget()
        let root = URL(fileURLWithPath: webRoot)
        for (page, route) in [("index.html", "/"), ("f.html", "/f")] {
            let url = root.appendingPathComponent(page)
            guard let data = FileManager.default.contents(atPath: url.path) else { throw .missingPage(url.path) }
            try budget.take(data.count, root: webRoot)
            assets.add(route, Array(data), contentType: "text/html; charset=utf-8")
        }
        if let worker = FileManager.default.contents(atPath: root.appendingPathComponent("sw.js").path) {
            try budget.take(worker.count, root: webRoot)
            assets.add(serviceWorkerPath, Array(worker), contentType: "text/javascript; charset=utf-8")
        }
        try assets.addTree(root.appendingPathComponent("static"), at: staticPrefix, budget: &budget)
        if let leafletDirectory, FileManager.default.fileExists(atPath: leafletDirectory + "/leaflet.js") {
            try assets.addTree(URL(fileURLWithPath: leafletDirectory), at: leafletPrefix, budget: &budget)
        }
        return assets
    }

    private struct Budget {
        var bytes = 0
        var files = 0
        mutating func take(_ size: Int, root: String) throws(WebAssetsError) {
            bytes += size
            files += 1
            guard bytes <= WebAssets.maxTotalBytes, files <= WebAssets.maxFiles else { throw .tooLarge(root) }
        }
    }

    /// Every regular file under `directory` (symbolic links followed: Debian links Leaflet's files from
    /// /usr/share/nodejs), hidden files skipped.
    private mutating func addTree(_ directory: URL, at prefix: String, budget: inout Budget) throws(WebAssetsError) {
        let base = directory.resolvingSymlinksInPath()
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: [.isRegularFileKey],
                                                          options: [.skipsHiddenFiles]) else { return }
        for case let url as URL in walker {
            let resolved = url.resolvingSymlinksInPath()
            guard (try? resolved.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                  url.path.hasPrefix(base.path + "/") else { continue }
            let relative = String(url.path.dropFirst(base.path.count + 1))
            // Pre-compressed copies and source maps are not served: skip what has no known type.
            guard let type = Self.contentType(for: relative) else { continue }
            guard let data = FileManager.default.contents(atPath: resolved.path) else { throw .unreadable(resolved.path) }
            try budget.take(data.count, root: directory.path)
            add(prefix + relative, Array(data), contentType: type)
        }
    }

    private mutating func add(_ path: String, _ bytes: [UInt8], contentType: String) {
        files[path] = Asset(body: ByteBuffer(bytes: bytes), contentType: contentType, etag: Self.etag(of: bytes))
    }

    /// FNV-1a, 64 bits: a validator, not a security measure (the bytes are public).
    static func etag(of bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "\"" + String(hash, radix: 16) + "-" + String(bytes.count, radix: 16) + "\""
    }

    /// The types the app and Leaflet use; nil for anything else, which is not served.
    static func contentType(for name: String) -> String? {
        switch name.split(separator: ".").last?.lowercased() {
        case "html": return "text/html; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "json": return "application/json"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "ico": return "image/x-icon"
        case "webmanifest": return "application/manifest+json"
        case "woff2": return "font/woff2"
        default: return nil
        }
    }
}

public enum WebAssetsError: Error, CustomStringConvertible {
    case missingPage(String)
    case unreadable(String)
    case tooLarge(String)

    public var description: String {
        switch self {
        case .missingPage(let path): return "the web app's page \(path) is missing (check --web-root)"
        case .unreadable(let path): return "cannot read \(path)"
        case .tooLarge(let root): return "\(root) holds more than \(WebAssets.maxFiles) files or \(WebAssets.maxTotalBytes) bytes: is it the right directory?"
        }
    }
}
