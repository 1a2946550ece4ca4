import HomewardCore
import HomewardWebPush
import Logging

/// Which VAPID key this relay signs pushes with. Browser subscriptions are bound to the key they were
/// made with, and in a cluster any relay may send any push (the outbox is shared), so every relay of a
/// cluster must sign with the same key:
/// - `--vapid-key` wins (the operator manages the key; it is never copied into the store);
/// - else a store shared by several relays (PostgreSQL) keeps one key for all of them, made by the first
///   relay that starts;
/// - else (SQLite, one relay alone) `vapid-key.pem` in the data directory, made on first start.
enum RelayVAPIDKey {
    /// The key's name among the store's shared secrets.
    static let secretName = "vapid-key"

    /// The key, or a `RelayStartupError` for the operator. `storeName` is the store as it may be logged.
    static func load(path: String?, dataDirectory: String, store: any RelayStore, storeName: String,
                     logger: Logger) async throws -> VAPIDKey {
        if let path {
            let key = try VAPIDKeyFile.load(path: path, dataDirectory: dataDirectory)
            if let stored = try await sharedKey(in: store, storeName: storeName, orStore: nil) {
                warnIfDifferent(key, stored: stored, storeName: storeName, logger: logger)
            }
            return key
        }
        // A fresh key is offered every start; the store keeps it only when it has none yet.
        guard let stored = try await sharedKey(in: store, storeName: storeName, orStore: VAPIDKey.generate()) else {
            return try VAPIDKeyFile.load(path: nil, dataDirectory: dataDirectory)
        }
        do {
            return try VAPIDKey(pem: stored)
        } catch {
            throw RelayStartupError.badSharedVAPIDKey(store: storeName, reason: unusableReason)
        }
    }

    static let unusableReason = """
        the stored value (table relay_secrets, name '\(secretName)') is not a PEM P-256 private key; restore it \
        from a backup, or give every relay the same --vapid-key (deleting the row makes the next relay that starts \
        create a new key, and every browser then has to subscribe again)
        """

    /// The store's PEM text, or nil when the store keeps no shared secrets (or, reading only, has none yet).
    private static func sharedKey(in store: any RelayStore, storeName: String, orStore candidate: VAPIDKey?) async throws -> String? {
        do {
            return try await store.sharedSecret(secretName, storingIfAbsent: candidate?.pem)
        } catch {
            throw RelayStartupError.badSharedVAPIDKey(store: storeName, reason: "\(error)")
        }
    }

    /// Names the mismatch by the public halves only: they are public anyway (`GET /v1/push/key`).
    private static func warnIfDifferent(_ key: VAPIDKey, stored: String, storeName: String, logger: Logger) {
        guard let storedKey = try? VAPIDKey(pem: stored) else {
            logger.warning("the VAPID key kept in the store is not usable; this relay signs with --vapid-key",
                           metadata: ["store": "\(storeName)", "vapid-public-key": "\(key.publicKeyBase64URL)"])
            return
        }
        guard storedKey.publicKeyBase64URL != key.publicKeyBase64URL else { return }
        logger.warning("""
            --vapid-key differs from the VAPID key kept in the store for the cluster; this relay signs with \
            --vapid-key, so pushes it sends to browsers that subscribed through a relay using the stored key fail: \
            give every relay the same --vapid-key, or none
            """, metadata: [
                "store": "\(storeName)", "vapid-public-key": "\(key.publicKeyBase64URL)",
                "stored-public-key": "\(storedKey.publicKeyBase64URL)",
            ])
    }
}
