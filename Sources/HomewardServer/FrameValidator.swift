import NIOCore
import NIOWebSocket

/// Rejects frames RFC 6455 forbids and NIO's decoder lets through: reserved bits without an
/// extension, reserved opcodes, and unmasked frames from a client.
final class FrameValidator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    enum Violation: Error {
        case reservedBits, reservedOpcode, unmasked
    }

    private static let known: Set<UInt8> = [0x0, 0x1, 0x2, 0x8, 0x9, 0xA]

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.rsv1 || frame.rsv2 || frame.rsv3 {
            context.fireErrorCaught(Violation.reservedBits)
        } else if !Self.known.contains(UInt8(webSocketOpcode: frame.opcode)) {
            context.fireErrorCaught(Violation.reservedOpcode)
        } else if frame.maskKey == nil {
            context.fireErrorCaught(Violation.unmasked)
        } else {
            context.fireChannelRead(data)
        }
    }
}
