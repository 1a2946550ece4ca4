import ArgumentParser
import Foundation
import HomewardProtocol

/// Parsing a client's `pos` and encoding the `pos` event observers get: Homeward's own JSON parser and
/// writer against Foundation's `JSONSerialization` and `JSONDecoder`/`JSONEncoder`, in one process and
/// one run. Each contender does the whole job, so the comparison is of what the relay would have to do:
/// parse and validate into a `Position`, and encode a `Position` with its sender into bytes.
struct Codec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Parse and encode a position: Homeward's JSON parser and writer against Foundation's (no brokers).",
        discussion: "Build with -c release: a debug build measures the compiler, not the code.")

    @Option(help: "Operations per round.")
    var iterations = 200_000
    @Option(help: "Rounds; the fastest round of each contender is reported.")
    var rounds = 5

    func validate() throws {
        try requirePositive(iterations, "--iterations")
        try requirePositive(rounds, "--rounds")
    }

    static let request = #"{"type":"pos","lat":57.708870,"lon":11.974560,"acc":8.5,"alt":12.25,"spd":1.4,"hdg":220,"batt":81,"ts":1763830000000}"#
    static let position = Position(lat: 57.70887, lon: 11.97456, acc: 8.5, alt: 12.25, spd: 1.4, hdg: 220, batt: 81, ts: 1_763_830_000_000)

    func run() throws {
        let bytes = Array(Self.request.utf8)
        let data = Data(bytes)
        var rows: [(String, Double)] = []
        rows.append(("parse: Homeward JSONParser + validation", measure { sink in
            guard case .success(.position(let p)) = IncomingRequest.parse(bytes, now: 0).result else { fatalError("not parsed") }
            sink &+= Int(p.ts)
        }))
        rows.append(("parse: JSONSerialization + the same checks", measure { sink in
            sink &+= Int(try! FoundationCodec.position(serialization: data).ts)
        }))
        rows.append(("parse: JSONDecoder (Codable) + the same checks", measure { sink in
            sink &+= Int(try! FoundationCodec.position(decoder: data).ts)
        }))
        rows.append(("encode: Homeward JSONWriter", measure { sink in
            sink &+= JSONWriter.encode(Event.position(from: "alice", Self.position).json).readableBytes
        }))
        rows.append(("encode: Homeward, framed for WebSocket (EncodedMessage, what the relay does)", measure { sink in
            sink &+= EncodedMessage(Event.position(from: "alice", Self.position).json, positionFrom: "alice").bytes.readableBytes
        }))
        rows.append(("encode: JSONSerialization", measure { sink in
            sink &+= try! FoundationCodec.encodeSerialization(from: "alice", Self.position).count
        }))
        rows.append(("encode: JSONEncoder (Codable)", measure { sink in
            sink &+= try! FoundationCodec.encodeEncoder(from: "alice", Self.position).count
        }))
        print("| what | ns per operation | × Homeward's |")
        print("|---|---:|---:|")
        for (index, (name, nanos)) in rows.enumerated() {
            let baseline = rows[index < 3 ? 0 : 3].1
            print("| \(name) | \(String(format: "%.0f", nanos)) | \(String(format: "%.2f", nanos / baseline)) |")
        }
    }

    /// Nanoseconds per operation of the fastest round.
    private func measure(_ operation: (inout Int) -> Void) -> Double {
        var best = Double.infinity
        var sink = 0
        let clock = ContinuousClock()
        for _ in 0..<rounds {
            let elapsed = clock.measure {
                for _ in 0..<iterations { operation(&sink) }
            }
            let nanos = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
            best = min(best, nanos / Double(iterations))
        }
        if sink == 42 { print("") }  // keeps the work observable
        return best
    }
}

/// What the relay would do with Foundation instead of its own parser and writer.
enum FoundationCodec {
    struct Invalid: Error {}

    /// A client's `pos` (no `from`) and the event observers get (with `from`): synthesized Codable leaves
    /// out what is nil.
    struct PositionJSON: Codable {
        var type = "pos"
        var from: String?
        var lat: Double
        var lon: Double
        var acc: Double?
        var alt: Double?
        var spd: Double?
        var hdg: Double?
        var batt: Double?
        var ts: Int64?
    }

    static func position(serialization data: Data) throws -> Position {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["type"] as? String == "pos",
              let lat = object["lat"] as? Double, (-90...90).contains(lat),
              let lon = object["lon"] as? Double, (-180...180).contains(lon)
        else { throw Invalid() }
        func optional(_ key: String, _ range: ClosedRange<Double>) throws -> Double? {
            guard let value = object[key] else { return nil }
            guard let number = value as? Double, range.contains(number) else { throw Invalid() }
            return number
        }
        let ts = (object["ts"] as? NSNumber)?.int64Value ?? 0
        return Position(lat: lat, lon: lon, acc: try optional("acc", 0...1e300), alt: try optional("alt", -1e300...1e300),
                        spd: try optional("spd", 0...1e300), hdg: try optional("hdg", 0...359.999999),
                        batt: try optional("batt", 0...100), ts: ts)
    }

    static func position(decoder data: Data) throws -> Position {
        let request = try JSONDecoder().decode(PositionJSON.self, from: data)
        guard request.type == "pos", (-90...90).contains(request.lat), (-180...180).contains(request.lon),
              request.acc.map({ $0 >= 0 }) ?? true, request.spd.map({ $0 >= 0 }) ?? true,
              request.hdg.map({ (0..<360).contains($0) }) ?? true, request.batt.map({ (0...100).contains($0) }) ?? true
        else { throw Invalid() }
        return Position(lat: request.lat, lon: request.lon, acc: request.acc, alt: request.alt, spd: request.spd,
                        hdg: request.hdg, batt: request.batt, ts: request.ts ?? 0)
    }

    static func encodeSerialization(from username: String, _ p: Position) throws -> Data {
        var object: [String: Any] = ["type": "pos", "from": username, "lat": p.lat, "lon": p.lon, "ts": p.ts]
        if let acc = p.acc { object["acc"] = acc }
        if let alt = p.alt { object["alt"] = alt }
        if let spd = p.spd { object["spd"] = spd }
        if let hdg = p.hdg { object["hdg"] = hdg }
        if let batt = p.batt { object["batt"] = batt }
        return try JSONSerialization.data(withJSONObject: object)
    }

    static func encodeEncoder(from username: String, _ p: Position) throws -> Data {
        try JSONEncoder().encode(PositionJSON(from: username, lat: p.lat, lon: p.lon, acc: p.acc, alt: p.alt, spd: p.spd,
                                              hdg: p.hdg, batt: p.batt, ts: p.ts))
    }
}
