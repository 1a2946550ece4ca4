import Foundation

/// Base64url without padding (RFC 4648 section 5), the encoding of every key, salt and JWT part in
/// Web Push. Decoding accepts padded input too, since `PushSubscription.toJSON()` in some browsers
/// and some tools pad.
public enum Base64URL {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes, or nil when `text` has a character outside the base64url alphabet or a bad length.
    public static func decode(_ text: String) -> [UInt8]? {
        var unpadded = Substring(text)
        while unpadded.hasSuffix("=") { unpadded = unpadded.dropLast() }
        guard unpadded.utf8.allSatisfy(isAlphabet) else { return nil }
        var standard = unpadded.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch standard.utf8.count % 4 {
        case 0: break
        case 2: standard += "=="
        case 3: standard += "="
        default: return nil
        }
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    /// True when every character of `text` is in the base64url alphabet (no padding).
    public static func isAlphabet(_ text: String) -> Bool {
        text.utf8.allSatisfy(isAlphabet)
    }

    private static func isAlphabet(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
