import HomewardCore
import HomewardProtocol
import NIOCore

/// What other threads hold of a connection: the relay's presence table, its actor and fan-out on
/// other event loops send through this, never through the handler itself.
///
/// Sendable as the compiler checks it: the handler is kept in a `NIOLoopBoundBox`, which traps when
/// touched off the connection's event loop, and every path from another thread hops to that loop first.
/// It is the connection's identity in the presence table, from sign-in until `detach` (channel closed).
final class ConnectionHandle: ClientSink {
    let loop: ConnectionLoop
    private let connection: NIOLoopBoundBox<WebSocketConnection?>

    var eventLoop: any EventLoop { loop.eventLoop }

    /// May be made on any thread; `attach` on the loop fills it.
    init(loop: ConnectionLoop) {
        self.loop = loop
        connection = .makeEmptyBox(valueType: WebSocketConnection.self, eventLoop: loop.eventLoop)
    }

    /// On the event loop.
    func attach(_ connection: WebSocketConnection) {
        self.connection.value = connection
    }

    /// On the event loop, when the channel is gone: ends the cycle handler → handle → handler.
    func detach() {
        connection.value = nil
    }

    /// Runs `body` with the handler on its event loop, if it is still there.
    func onLoop(_ body: @escaping @Sendable (WebSocketConnection) -> Void) {
        if eventLoop.inEventLoop {
            if let connection = connection.value { body(connection) }
            return
        }
        eventLoop.execute {
            if let connection = self.connection.value { body(connection) }
        }
    }

    /// On the event loop: hands `message` to the handler (see `ConnectionLoop.receive`).
    func deliver(_ message: EncodedMessage) {
        connection.value?.enqueue(message)
    }

    func send(_ message: EncodedMessage) {
        // Fan-out calls this from the publisher's event loop: when that is ours, no task hop at all;
        // when it is another of the relay's loops, that loop batches the hop (see `ConnectionLoop`).
        // Order per caller is kept either way.
        if eventLoop.inEventLoop {
            deliver(message)
        } else if let here = ConnectionLoop.current.currentValue {
            here.forward(message, to: self)
        } else {
            eventLoop.execute { self.deliver(message) }
        }
    }

    func close(_ code: CloseCode, reason: String) {
        onLoop { $0.closeNow(code, reason: reason) }
    }
}
