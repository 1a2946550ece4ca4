import NIOCore

/// A peer-broker connection that publishes raw bytes to a named subject or topic.
protocol TopicLink: AnyObject, Sendable {
    var socket: BenchSocket { get }
    func publish(_ topic: String, _ payload: ByteBuffer)
}

/// A walker on a peer broker: publishes the same position bytes a Homeward observer would receive
/// to its own subject (NATS) or topic (MQTT).
final class TopicWalker<Link: TopicLink>: Publisher, Sendable {
    let link: Link
    let index: Int
    let topic: String
    var eventLoop: any EventLoop { link.socket.eventLoop }

    init(link: Link, index: Int, topic: String) {
        self.link = link
        self.index = index
        self.topic = topic
    }

    func publish(sequence: Int) {
        link.publish(topic, Payload.peerPosition(walker: index, from: "walker\(index)", sequence: sequence,
                                                 allocator: link.socket.channel.allocator))
    }
}
