import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward push`: the account's Web Push subscriptions. Browsers subscribe by themselves (the web
/// app's service worker); `subscribe` is for operators and tests with their own push endpoint.
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Web Push subscriptions: where the relay pushes alarms when your app is closed.",
        subcommands: [List.self, Subscribe.self, Unsubscribe.self],
        defaultSubcommand: List.self)

    @OptionGroup var global: GlobalOptions

    struct List: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Your push subscriptions.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let list = try await context.call { () async throws(RelayClientError) in try await context.client.pushSubscriptions() }
            if context.console.json {
                context.console.line(JSONWriter.string(["type": "push.subscriptions", "subscriptions": .array(list.map(\.json))]))
                return
            }
            guard !list.isEmpty else { return context.console.line("no push subscriptions") }
            var table = TextTable("ID", "SUBSCRIBED", "ENDPOINT")
            for subscription in list {
                table.add(subscription.subscriptionId, HumanFormat.time(subscription.createdAt), HumanFormat.shown(subscription.endpoint))
            }
            context.console.line(table.render())
        }
    }

    struct Subscribe: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "subscribe", abstract: "Register a Web Push endpoint with its keys (as PushSubscription.toJSON() gives them).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The push service URL (https).") var endpoint: String
        @Option(help: "The subscription's P-256 public key, base64url (65 bytes).") var p256dh: String
        @Option(help: "The subscription's auth secret, base64url (16 bytes).") var auth: String

        func execute(in context: CommandContext) async throws {
            let id = try await context.call { () async throws(RelayClientError) in
                try await context.client.subscribePush(endpoint: endpoint, p256dh: p256dh, auth: auth)
            }
            context.console.emit("subscribed \(id)", json: ["type": "push.subscribed", "subscriptionId": .string(id)])
        }
    }

    struct Unsubscribe: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "unsubscribe", abstract: "Remove a push subscription by its id.")
        @OptionGroup var global: GlobalOptions
        @Argument var id: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.unsubscribePush(id) }
            context.console.emit("unsubscribed \(id)", json: ["type": "push.unsubscribed", "subscriptionId": .string(id)])
        }
    }
}
