/// The path of an HTTP request target, percent-decoded and checked before any route sees it.
///
/// Routes match decoded paths exactly, so a refused path is one no route could serve anyway; refusing
/// it with 400 (rather than 404) says plainly that `..`, `%2e%2e`, NULs and backslashes are never
/// resolved against anything.
enum RequestPath: Equatable {
    case path(String)
    case tooLong
    case invalid

    /// Longer request targets get 414: no route of the relay comes near this.
    static let maxBytes = 2048

    init(uri: String) {
        guard uri.utf8.count <= Self.maxBytes else { self = .tooLong; return }
        let raw = uri.utf8.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard raw.first == UInt8(ascii: "/"), let decoded = Self.percentDecoded(raw) else { self = .invalid; return }
        guard let text = String(validating: decoded, as: UTF8.self),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" }),
              !text.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." })
        else { self = .invalid; return }
        self = .path(text)
    }

    private static func percentDecoded(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
