import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The points of a GPX 1.0/1.1 file: its track points, or its route points if it has no track.
public struct GPXTrack: Sendable, Equatable {
    public var name: String?
    public var points: [Coordinate]
    /// Elevation (`<ele>`) of each point, where given.
    public var elevations: [Double?]

    public var route: Route {
        get throws(Route.Failure) { try Route(points: points, elevations: elevations) }
    }

    public static func load(path: String) throws(GPXError) -> GPXTrack {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        return try parse(data)
    }

    public static func parse(_ data: Data) throws(GPXError) -> GPXTrack {
        let parser = XMLParser(data: data)
        let reader = GPXReader()
        parser.delegate = reader
        parser.shouldProcessNamespaces = true
        let ok = parser.parse()
        if let failure = reader.failure { throw failure }
        if let root = reader.root, !reader.sawRoot { throw .notGPX(root: root) }
        // On Linux XMLParser recovers from many errors and still returns true: the delegate's
        // first reported error is what counts.
        if let error = reader.xmlError { throw error }
        guard ok else {
            throw .malformed(line: parser.lineNumber, column: parser.columnNumber, reason: GPXReader.reason(parser.parserError))
        }
        guard reader.sawRoot else { throw .notGPX(root: "nothing") }
        let chosen = reader.trackPoints.isEmpty ? reader.routePoints : reader.trackPoints
        guard !chosen.isEmpty else { throw .noPoints }
        return GPXTrack(name: reader.name, points: chosen.map(\.coordinate), elevations: chosen.map(\.elevation))
    }
}

/// Why a GPX file cannot be walked.
public enum GPXError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case malformed(line: Int, column: Int, reason: String)
    case notGPX(root: String)
    case invalidPoint(line: Int, reason: String)
    case noPoints

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "cannot read GPX file \(path): \(reason)"
        case .malformed(let line, let column, let reason): return "malformed GPX at line \(line), column \(column): \(reason)"
        case .notGPX(let root): return "not a GPX file: the document element is <\(root)>, expected <gpx>"
        case .invalidPoint(let line, let reason): return "invalid GPX point at line \(line): \(reason)"
        case .noPoints: return "the GPX file has no track or route points"
        }
    }
}

/// The XMLParser delegate: collects `trkpt` and `rtept` with their `ele`.
private final class GPXReader: NSObject, XMLParserDelegate {
    struct Point {
        var coordinate: Coordinate
        var elevation: Double?
    }

    var root: String?
    var sawRoot = false
    var name: String?
    var trackPoints: [Point] = []
    var routePoints: [Point] = []
    var failure: GPXError?
    var xmlError: GPXError?

    private var current: Point?
    private var currentIsTrack = false
    private var text = ""
    private var path: [String] = []

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes: [String: String] = [:]) {
        let element = localName(elementName)
        if path.isEmpty {
            root = element
            sawRoot = element == "gpx"
            if !sawRoot { parser.abortParsing() }
        }
        path.append(element)
        text = ""
        guard element == "trkpt" || element == "rtept" else { return }
        guard let latText = attributes["lat"], let lonText = attributes["lon"] else {
            return fail(parser, "<\(element)> needs lat and lon attributes")
        }
        guard let lat = Double(latText.trimmingCharacters(in: .whitespaces)), (-90...90).contains(lat) else {
            return fail(parser, "lat \"\(latText)\" is not a latitude in [-90, 90]")
        }
        guard let lon = Double(lonText.trimmingCharacters(in: .whitespaces)), (-180...180).contains(lon) else {
            return fail(parser, "lon \"\(lonText)\" is not a longitude in [-180, 180]")
        }
        current = Point(coordinate: Coordinate(lat: lat, lon: lon))
        currentIsTrack = element == "trkpt"
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        let element = localName(elementName)
        defer {
            path.removeLast()
            text = ""
        }
        switch element {
        case "ele" where current != nil:
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let elevation = Double(trimmed), elevation.isFinite else {
                return fail(parser, "<ele> \"\(trimmed)\" is not a number")
            }
            current?.elevation = elevation
        case "name" where name == nil && path.count >= 2 && ["trk", "rte", "metadata"].contains(path[path.count - 2]):
            name = text.trimmingCharacters(in: .whitespacesAndNewlines)
        case "trkpt", "rtept":
            guard let point = current else { return }
            if currentIsTrack { trackPoints.append(point) } else { routePoints.append(point) }
            current = nil
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        guard xmlError == nil, failure == nil else { return }
        xmlError = .malformed(line: parser.lineNumber, column: parser.columnNumber, reason: Self.reason(parseError))
        parser.abortParsing()
    }

    /// Words for the XML errors a hand-edited GPX file typically has; Foundation gives only a code.
    static func reason(_ error: (any Error)?) -> String {
        guard let error else { return "unknown XML error" }
        let code = (error as NSError).code
        // The numbers are libxml2's (and Darwin's NSXMLParserError's); corelibs Foundation's
        // XMLParser.ErrorCode enum numbers them differently, so match the numbers.
        switch code {
        case 76: return "a closing tag does not match the element it closes"
        case 5: return "the document ends before its elements are closed"
        case 4: return "the file is empty"
        case 85: return "elements are not properly nested"
        case 38, 39, 40: return "an attribute is not properly quoted"
        case 72, 73, 74: return "a tag is not closed with >"
        default:
            let text = (error as NSError).localizedDescription
            return text.isEmpty || text.contains("(null)") || text.contains("could not be completed") ? "XML error \(code)" : text
        }
    }

    private func fail(_ parser: XMLParser, _ reason: String) {
        if failure == nil { failure = .invalidPoint(line: parser.lineNumber, reason: reason) }
        parser.abortParsing()
    }

    private func localName(_ name: String) -> String {
        name.split(separator: ":").last.map(String.init) ?? name
    }
}
