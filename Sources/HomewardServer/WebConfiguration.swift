import Foundation

/// What the relay's web app needs: where its files are, where Leaflet is, and the operator's tile server.
public struct WebConfiguration: Sendable {
    /// The app's files (`index.html`, `f.html`, `static/...`); nil serves no app (`/` and `/f` are 404).
    public var webRoot: String?
    /// Leaflet's files as Debian's libjs-leaflet installs them; a missing directory means the page draws
    /// its own map (track, position, scale) without Leaflet.
    public var leafletDirectory: String? = WebConfiguration.debianLeafletDirectory
    /// A tile server the browser may fetch map images from. Without one the page requests nothing from
    /// anybody but the relay: whom a person follows, and where, is sensitive.
    public var mapTiles: MapTiles?
    /// An MBTiles file of vector tiles the relay serves itself (`VectorTileRoute`); the page draws them.
    public var vectorTilesPath: String?

    public static let debianLeafletDirectory = "/usr/share/javascript/leaflet"

    public init() {}

    /// The web root of an installed relay (`PREFIX/share/homeward/web` beside `PREFIX/bin`), else the
    /// `web/` directory of the source checkout the binary was built from (`swift run`, tests); nil when
    /// neither exists.
    public static func defaultWebRoot(executablePath: String? = Bundle.main.executablePath) -> String? {
        var candidates: [URL] = []
        if let executablePath {
            let bin = URL(fileURLWithPath: executablePath).resolvingSymlinksInPath().deletingLastPathComponent()
            candidates.append(bin.deletingLastPathComponent().appendingPathComponent("share/homeward/web"))
        }
        // This file is Sources/HomewardServer/WebConfiguration.swift; the checkout's web/ is two levels up.
        candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("web"))
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("index.html").path) }?.path
    }
}

/// A tile server URL template (`https://tile.example.org/{z}/{x}/{y}.png`) and the attribution its
/// licence requires.
public struct MapTiles: Sendable, Equatable {
    public let urlTemplate: String
    public let attribution: String
    /// The Content-Security-Policy source that allows exactly this server's images (`{s}` subdomains as `*.`).
    public let cspSource: String

    public init(urlTemplate: String, attribution: String) throws(MapTilesError) {
        guard attribution.unicodeScalars.count <= 500, !attribution.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .badAttribution
        }
        guard urlTemplate.utf8.count <= 2048,
              let schemeEnd = urlTemplate.range(of: "://") else { throw .notAURL(urlTemplate) }
        let scheme = urlTemplate[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw .notAURL(urlTemplate) }
        let rest = urlTemplate[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        // Host labels, `{s}` as the first label, and a port; nothing that could end the CSP directive.
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:{}")
        guard !authority.isEmpty, authority.unicodeScalars.allSatisfy(allowed.contains),
              !authority.contains("{") || authority.hasPrefix("{s}.") && authority.dropFirst(4).allSatisfy({ $0 != "{" && $0 != "}" }) else {
            throw .notAURL(urlTemplate)
        }
        guard ["{z}", "{x}", "{y}"].allSatisfy(urlTemplate.contains),
              !urlTemplate.unicodeScalars.contains(where: { $0 == " " || $0 == ";" || $0 == "," || $0 == "'" || $0.value < 0x21 || $0.value > 0x7E }) else {
            throw .missingPlaceholders(urlTemplate)
        }
        self.urlTemplate = urlTemplate
        self.attribution = attribution
        let host = authority.hasPrefix("{s}.") ? "*." + authority.dropFirst(4) : String(authority)
        self.cspSource = "\(scheme)://\(host)"
    }
}

public enum MapTilesError: Error, CustomStringConvertible, Equatable {
    case notAURL(String)
    case missingPlaceholders(String)
    case badAttribution

    public var description: String {
        switch self {
        case .notAURL(let text):
            return "map-tiles '\(text)' is not an http(s) URL template with a plain host name (a {s}. subdomain prefix is allowed)"
        case .missingPlaceholders(let text):
            return "map-tiles '\(text)' needs {z}, {x} and {y} and no spaces, quotes, commas or semicolons"
        case .badAttribution:
            return "map-attribution must be at most 500 characters without control characters"
        }
    }
}
