import Dispatch
import NIOCore

/// The tool's clock: monotonic microseconds, offset so that stamps are always at least 1 s.
public enum BenchClock {
    static let base = DispatchTime.now().uptimeNanoseconds

    public static func micros() -> UInt64 {
        let start = base  // initialised on first use: read it before the clock
        let now = DispatchTime.now().uptimeNanoseconds
        return (now &- start) / 1000 + 1_000_000
    }

    public static func seconds() -> Double { Double(micros()) / 1e6 }
}

/// Position messages of realistic size (about 130 bytes). The send time travels inside the message,
/// in `alt`, as milliseconds with microsecond digits: the relay passes `alt` through untouched and the
/// peers pass the whole payload through, so every broker's receiver reads it back the same way.
public enum Payload {
    /// What a Homeward walker sends: `{"type":"pos","lat":...,"alt":<stamp>,...,"ts":...}`.
    public static func homewardPosition(walker: Int, sequence: Int, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 160)
        buffer.writeStaticString("{\"type\":\"pos\",")
        writeFields(walker: walker, sequence: sequence, into: &buffer)
        return buffer
    }

    /// What a peer's walker publishes: the same bytes a Homeward observer receives,
    /// `{"type":"pos","from":"<name>",...}`, so every broker carries the same payload.
    public static func peerPosition(walker: Int, from name: String, sequence: Int, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 180)
        buffer.writeStaticString("{\"type\":\"pos\",\"from\":\"")
        buffer.writeString(name)
        buffer.writeStaticString("\",")
        writeFields(walker: walker, sequence: sequence, into: &buffer)
        return buffer
    }

    private static func writeFields(walker: Int, sequence: Int, into buffer: inout ByteBuffer) {
        let micros = BenchClock.micros()
        let step = sequence % 1000
        buffer.writeStaticString("\"lat\":57.")
        buffer.writeString(String(700_000 + (walker % 1000) * 37 + step))
        buffer.writeStaticString(",\"lon\":11.")
        buffer.writeString(String(900_000 + (walker % 1000) * 53 + step))
        buffer.writeStaticString(",\"acc\":8.5,\"alt\":")
        buffer.writeString(String(micros / 1000))
        buffer.writeInteger(UInt8(ascii: "."))
        let fraction = micros % 1000
        if fraction < 100 { buffer.writeInteger(UInt8(ascii: "0")) }
        if fraction < 10 { buffer.writeInteger(UInt8(ascii: "0")) }
        buffer.writeString(String(fraction))
        buffer.writeStaticString(",\"spd\":1.4,\"hdg\":92.5,\"batt\":81,\"ts\":")
        buffer.writeString(String(1_763_830_000_000 + Int64(sequence)))
        buffer.writeInteger(UInt8(ascii: "}"))
    }

    private static let altKey: [UInt8] = Array("\"alt\":".utf8)

    /// The send stamp (tool microseconds) carried in `alt`, or nil if the message has none.
    public static func stamp(in buffer: ByteBuffer) -> UInt64? {
        buffer.withUnsafeReadableBytes { bytes -> UInt64? in
            let count = bytes.count
            let key = altKey
            guard count > key.count else { return nil }
            var index = 0
            outer: while index <= count - key.count {
                for offset in 0..<key.count where bytes[index + offset] != key[offset] {
                    index += 1
                    continue outer
                }
                var position = index + key.count
                var whole: UInt64 = 0
                while position < count, bytes[position] >= 48, bytes[position] <= 57 {
                    whole = whole * 10 + UInt64(bytes[position] - 48)
                    position += 1
                }
                var fraction: UInt64 = 0
                var digits = 0
                if position < count, bytes[position] == UInt8(ascii: ".") {
                    position += 1
                    while position < count, bytes[position] >= 48, bytes[position] <= 57 {
                        if digits < 3 {
                            fraction = fraction * 10 + UInt64(bytes[position] - 48)
                            digits += 1
                        }
                        position += 1
                    }
                }
                while digits < 3 {
                    fraction *= 10
                    digits += 1
                }
                return whole * 1000 + fraction
            }
            return nil
        }
    }

    /// An alarm-sized message for the peers (Homeward's `alarm` event is about this big).
    public static func peerAlarm(from name: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 300)
        buffer.writeStaticString("{\"type\":\"alarm\",\"alarm\":{\"alarmId\":\"a7f3c2d9e1b04a6c\",\"from\":{\"username\":\"")
        buffer.writeString(name)
        buffer.writeStaticString("\",\"name\":\"")
        buffer.writeString(name)
        buffer.writeStaticString("\"},\"text\":\"I need help\",\"position\":{\"lat\":57.7089,\"lon\":11.9746,\"acc\":8,\"ts\":1763830000000},\"createdAt\":1763830000000,\"acked\":[]}}")
        return buffer
    }
}
