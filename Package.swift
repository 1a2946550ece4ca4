// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "homeward",
    // Linux (Debian, Swift 6) is what CI builds and tests. macOS 15 is the lowest macOS with
    // Synchronization's `Mutex` and `Atomic`, which the relay uses; macOS is not tested here.
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "homeward-relay", targets: ["homeward-relay"]),
        .executable(name: "homeward", targets: ["homeward"]),
        .executable(name: "homeward-bench", targets: ["homeward-bench"]),
        .library(name: "HomewardClient", targets: ["HomewardClient"]),
        .library(name: "HomewardProtocol", targets: ["HomewardProtocol"]),
        .library(name: "HomewardNATS", targets: ["HomewardNATS"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        .target(
            name: "HomewardProtocol",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        // A small client of nats-server (core NATS, plain TCP) for the relay's bus and the benchmark.
        .target(
            name: "HomewardNATS",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "HomewardCore",
            dependencies: [
                "HomewardProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                // The timers' due-ordered index (`DeadlineIndex`).
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // The relays' bus on nats-server (--bus nats://...): a RelayBus over HomewardNATS.
        .target(
            name: "HomewardCluster",
            dependencies: [
                "HomewardCore", "HomewardProtocol", "HomewardNATS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // Web Push (RFC 8030) as an application server: message encryption (RFC 8291, aes128gcm),
        // VAPID (RFC 8292) and a sender on async-http-client. Knows nothing of Homeward.
        .target(
            name: "HomewardWebPush",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .target(
            name: "HomewardStorage",
            dependencies: ["HomewardCore", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        // The RelayStore on PostgreSQL (--store postgres://...); its own module so that the core
        // and the SQLite store do not depend on postgres-nio.
        .target(
            name: "HomewardPostgres",
            dependencies: [
                "HomewardCore", "HomewardProtocol",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The system's libssl (Debian libssl-dev, found with pkg-config), with a few inline C wrappers for
        // OpenSSL's function-like macros.
        .systemLibrary(
            name: "CHomewardOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // A TLS server handler for NIO on the system's OpenSSL (--tls-backend openssl).
        .target(
            name: "HomewardOpenSSL",
            dependencies: [
                "CHomewardOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        .target(
            name: "HomewardServer",
            dependencies: [
                "HomewardProtocol", "HomewardCore", "HomewardStorage", "HomewardPostgres", "HomewardNATS", "HomewardCluster",
                "HomewardWebPush", "HomewardOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "homeward-relay",
            dependencies: [
                "HomewardServer", "HomewardWebPush",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "HomewardClient",
            dependencies: [
                "HomewardProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "HomewardCLI",
            dependencies: [
                "HomewardClient", "HomewardProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "homeward",
            dependencies: ["HomewardCLI"]
        ),
        // Benchmark: Homeward vs nats-server vs mosquitto on the same load. Not part of `swift test`.
        .target(
            name: "HomewardBench",
            dependencies: [
                "HomewardProtocol", "HomewardNATS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "homeward-bench",
            dependencies: [
                "HomewardBench", "HomewardProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // What a relay's cache costs on a shared store: a full reload against applying a change notice (issue 13).
        .executableTarget(
            name: "homeward-cache-bench",
            dependencies: [
                "HomewardCore", "HomewardProtocol", "HomewardStorage", "HomewardCluster", "HomewardPostgres", "HomewardBench",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "HomewardOpenSSLTests",
            dependencies: [
                "HomewardOpenSSL", "HomewardServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "HomewardWebPushTests",
            dependencies: [
                "HomewardWebPush",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "HomewardClientTests",
            dependencies: [
                "HomewardClient", "HomewardCLI", "HomewardProtocol", "HomewardServer", "HomewardCore", "HomewardTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("Fixtures")]
        ),
        // Tests: one target per module, named `<Module>Tests`, each depending only on what its tests use.
        // What several of them share lives in small support modules under Tests/ (regular targets,
        // since a test target cannot be depended on); no product names them, so only tests use them.

        // Waiting and child processes for tests: `withTimeout`, `TestFailure`, a process's output read line
        // by line, nats-server on a loopback port, a log that keeps its lines. Nothing of Homeward.
        .target(
            name: "HomewardTestSupport",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            path: "Tests/HomewardTestSupport"
        ),
        // Doubles around the core's `Relay`: a relay over a real SQLite file with a clock the test moves
        // (`SafetyHarness`), a connection that records (`RecordingSink`), a store that fails on demand
        // (`InstrumentedStore`), the cheap `PasswordHasher.forTests`, JSON helpers, and `CacheSnapshot`, a cache's
        // durable part as a comparable value (it reads the cache's indexes, which the core shows the package).
        .target(
            name: "HomewardCoreTestSupport",
            dependencies: [
                "HomewardCore", "HomewardProtocol", "HomewardStorage",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Tests/HomewardCoreTestSupport"
        ),
        // A real PostgreSQL server on loopback for the tests that need one (`PostgresServer`), and the suite
        // trait that starts one per suite (`.postgresServer`).
        .target(
            name: "HomewardPostgresTestSupport",
            dependencies: ["HomewardPostgres", "HomewardTestSupport"],
            path: "Tests/HomewardPostgresTestSupport"
        ),
        .testTarget(
            name: "HomewardProtocolTests",
            dependencies: ["HomewardProtocol", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "HomewardNATSTests",
            dependencies: [
                "HomewardNATS", "HomewardTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The rules (`RelayState`) and the `Relay` actor, on a real SQLite file where a test needs a store.
        .testTarget(
            name: "HomewardCoreTests",
            dependencies: ["HomewardCore", "HomewardProtocol", "HomewardStorage", "HomewardCoreTestSupport"]
        ),
        // Relays that share a store and a bus: the bus's codec, the bus on a real nats-server, and the core's
        // `Relay` against a recorded bus (`RecordingBus`, `CountingStore`). The last import only
        // HomewardCore; they stay in one target with the bus they stand for.
        .testTarget(
            name: "HomewardClusterTests",
            dependencies: [
                "HomewardCluster", "HomewardCore", "HomewardProtocol", "HomewardNATS", "HomewardStorage",
                "HomewardTestSupport", "HomewardCoreTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The SQLite store, and how the relay writes to a store: group commit, failed writes, and the alarm
        // spool file that keeps alarms while the store fails (its records are written with the bus's codec).
        .testTarget(
            name: "HomewardStorageTests",
            dependencies: [
                "HomewardStorage", "HomewardCore", "HomewardProtocol", "HomewardCluster", "HomewardCoreTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The PostgreSQL store on a real server, and the `RelayStore` contract (`StoreContractTests`), which
        // runs each case on both stores, SQLite and PostgreSQL: it shares its subjects with the PostgreSQL
        // tests, and this is the one target that needs both stores.
        .testTarget(
            name: "HomewardPostgresTests",
            dependencies: [
                "HomewardPostgres", "HomewardStorage", "HomewardCore", "HomewardProtocol",
                "HomewardTestSupport", "HomewardCoreTestSupport", "HomewardPostgresTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The edge's parts (HTTP, WebSocket, PROXY header, push delivery, TLS certificates), and whole relays
        // driven through it: in this process (`TestRelay`, `EndToEnd`, `Accounts`), as a child process
        // (`Process`), and several on a real PostgreSQL and nats-server (`Cluster`). Those drive every module
        // at once, through HomewardServer, which is what they test.
        .testTarget(
            name: "HomewardServerTests",
            dependencies: [
                "HomewardServer", "HomewardProtocol", "HomewardCore", "HomewardStorage", "HomewardPostgres",
                "HomewardNATS", "HomewardWebPush",
                "HomewardTestSupport", "HomewardCoreTestSupport", "HomewardPostgresTestSupport",
                // `DelayProxy`: a slow link between a relay and nats-server in the cluster tests.
                "HomewardBench",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The repository against itself, no module: every file, type and member docs/architecture.md names
        // exists, and every folder under Tests/ is a target here.
        .testTarget(name: "HomewardRepositoryTests"),
    ]
)
