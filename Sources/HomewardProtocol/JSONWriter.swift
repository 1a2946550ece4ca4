import NIOCore

/// Serialises `JSONValue` into a `ByteBuffer` as compact JSON.
public enum JSONWriter {
    public static func write(_ value: JSONValue, into buffer: inout ByteBuffer) {
        switch value {
        case .null: buffer.writeStaticString("null")
        case .bool(let flag): buffer.writeStaticString(flag ? "true" : "false")
        case .int(let integer): buffer.writeString(String(integer))
        case .double(let double):
            // Non-finite numbers never reach here through the protocol; null keeps output valid JSON if one does.
            if double.isFinite { buffer.writeString(String(double)) } else { buffer.writeStaticString("null") }
        case .string(let string): writeString(string, into: &buffer)
        case .array(let elements):
            buffer.writeInteger(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
                write(element, into: &buffer)
            }
            buffer.writeInteger(UInt8(ascii: "]"))
        case .object(let members):
            buffer.writeInteger(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
                writeString(member.0, into: &buffer)
                buffer.writeInteger(UInt8(ascii: ":"))
                write(member.1, into: &buffer)
            }
            buffer.writeInteger(UInt8(ascii: "}"))
        }
    }

    public static func encode(_ value: JSONValue, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 128)
        write(value, into: &buffer)
        return buffer
    }

    public static func string(_ value: JSONValue) -> String {
        let buffer = encode(value)
        return String(buffer: buffer)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "\""))
        var needsEscaping = false
        for byte in string.utf8 where byte < 0x20 || byte == 0x22 || byte == 0x5C {
            needsEscaping = true
            break
        }
        if !needsEscaping {
            buffer.writeString(string)
        } else {
            for byte in string.utf8 {
                switch byte {
                case 0x22: buffer.writeStaticString("\\\"")
                case 0x5C: buffer.writeStaticString("\\\\")
                case 0x0A: buffer.writeStaticString("\\n")
                case 0x0D: buffer.writeStaticString("\\r")
                case 0x09: buffer.writeStaticString("\\t")
                case 0..<0x20:
                    buffer.writeStaticString("\\u00")
                    buffer.writeInteger(hex[Int(byte >> 4)])
                    buffer.writeInteger(hex[Int(byte & 0x0F)])
                default: buffer.writeInteger(byte)
                }
            }
        }
        buffer.writeInteger(UInt8(ascii: "\""))
    }
}
