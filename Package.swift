// swift-tools-version:6.0
//
// Tessera: a plugin-extensible download framework for Linux, on libcurl and libxml2.
// The layout is described in README.md ("Layout") and ../shared/DESIGN.md.

import PackageDescription

/// An entity plugin: its library (`Plugins/<name>`, only on Tessera's public API), its sample
/// executable (`Sources/Samples/<sample>`) and its tests (`Tests/<name>Tests`).
struct Plugin {
    var name: String
    var sample: String

    /// The plugin's library. Its sample is an executable target of this package only (SwiftPM
    /// builds and runs it here: `swift run dash-sample`); packages that depend on Tessera do not
    /// get it as a product.
    var products: [Product] {
        [.library(name: name, targets: [name])]
    }

    var targets: [Target] {
        [
            .target(name: name, dependencies: ["Tessera"], path: "Plugins/\(name)"),
            .executableTarget(name: sample, dependencies: [.target(name: name), "Tessera", "TesseraTesting"], path: "Sources/Samples/\(sample)"),
            .testTarget(name: "\(name)Tests", dependencies: [.target(name: name), "Tessera", "TesseraTesting", "TesseraTestSupport"]),
        ]
    }
}

let plugins = [
    Plugin(name: "PlayurlEntity", sample: "playurl-sample"),
    Plugin(name: "DASHEntity", sample: "dash-sample"),
    Plugin(name: "MetalinkEntity", sample: "metalink-sample"),
    Plugin(name: "HLSEntity", sample: "hls-sample"),
]

let package = Package(
    name: "Tessera",
    products: [
        .library(name: "Tessera", targets: ["Tessera"]),
        .library(name: "TesseraTesting", targets: ["TesseraTesting"]),
        .executable(name: "tessera", targets: ["tessera"]),
        .executable(name: "tessera-server", targets: ["tessera-server"]),
    ] + plugins.flatMap(\.products),
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // The core library reports its counters through CoreMetrics (no backend of its own);
        // the daemon exports them with swift-prometheus.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The daemon's HTTP and WebSocket server (TesseraServer only; the core library does not
        // depend on it).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The fleet's queue in PostgreSQL (TesseraFleet only; neither the core library nor the
        // plugins depend on it).
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
    ],
    targets: [
        // MARK: C libraries
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Linux calls Swift's Glibc module leaves out (copy_file_range).
        .systemLibrary(name: "CTesseraSystem"),

        // MARK: The framework
        .target(
            name: "Tessera",
            dependencies: [
                "CCurl",
                "CLibXML2",
                "COpenSSL",
                "CTesseraSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // (SQLite's C API, for the store's statements bound value by value: BoundStatement.)
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "TesseraTesting",
            dependencies: [
                "Tessera",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),

        // MARK: The JSON of `tessera get --json` and the daemon's `/events` (EventJSON, RPCValue):
        // its own module, so the `tessera` executable writes it without linking the daemon.
        .target(name: "TesseraEvents", dependencies: ["Tessera"]),

        // MARK: The daemon (`tessera serve`): aria2's JSON-RPC, a native API, the dashboard and
        // the metrics, on Hummingbird. Kept out of `Tessera` so plugin authors do not build it.
        .target(
            name: "TesseraServer",
            dependencies: [
                "Tessera",
                "TesseraEvents",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // MARK: The fleet (`tessera serve --fleet postgres://...`): many daemons share one queue in
        // PostgreSQL and take over each other's downloads. Kept out of `Tessera` and the plugins.
        .target(
            name: "TesseraFleet",
            dependencies: [
                "Tessera",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Entity plugins (see `plugins` above), and the expectations their tests share
        // (Swift Testing; not a product).
        .target(name: "TesseraTestSupport", dependencies: ["Tessera"], path: "Tests/TesseraTestSupport"),
    ] + plugins.flatMap(\.targets) + [

        // MARK: Executables
        // The commands of the command line (options, the display, the session), shared by the two
        // executables below; not a product.
        .target(
            name: "TesseraCLI",
            dependencies: [
                "Tessera",
                "TesseraEvents",
                "CTesseraSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ] + plugins.map { .target(name: $0.name) }
        ),
        // `tessera`: the downloads. `serve`, `fleet` and `demo` it hands to `tessera-server`
        // (installed with it), so that a `tessera get` does not load the daemon's, the fleet's and
        // the test origin's libraries (Sources/tessera/ServerExecutable.swift says what that costs).
        .executableTarget(
            name: "tessera",
            dependencies: [
                "Tessera",
                "TesseraCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "tessera-server",
            dependencies: [
                "Tessera",
                "TesseraCLI",
                "TesseraServer",
                "TesseraFleet",
                "TesseraTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // `make fleet-demo` and `make fleet-bench`: a PostgreSQL of its own, real workers.
        .executableTarget(
            name: "tessera-fleet-bench",
            dependencies: [
                "Tessera", "TesseraFleet", "TesseraTesting",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/FleetBench"
        ),
        .executableTarget(
            name: "tessera-engine-bench",
            dependencies: ["Tessera"],
            path: "Benchmarks/EngineBench"
        ),

        // MARK: Tests
        // Runs measured scenarios (memory, scale, kill -9) in a process of their own, so other
        // tests running in parallel cannot disturb what is measured.
        .executableTarget(
            name: "tessera-test-helper",
            dependencies: ["Tessera", "TesseraTesting", "MetalinkEntity", "CTesseraSystem"],
            path: "Tests/Helpers/TesseraTestHelper"
        ),
        // The fuzzing harnesses (`make fuzz` builds them with libFuzzer); built as usual, they
        // replay a corpus, which `make test` does with every finding kept in Tests/Fuzz/Corpus.
        .executableTarget(
            name: "tessera-fuzz",
            dependencies: ["Tessera"] + plugins.map { .target(name: $0.name) },
            path: "Tests/Fuzz",
            exclude: ["Corpus"]
        ),
        .testTarget(
            name: "TesseraTests",
            dependencies: ["Tessera", "TesseraTesting", .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        // Runs the built `tessera` executable, as its users do.
        .testTarget(
            name: "TesseraCLITests",
            dependencies: ["Tessera", "TesseraTesting", "TesseraCLI", "CTesseraSystem"]
        ),
        // The daemon (`tessera serve`): the RPC without a network, then the HTTP server on 127.0.0.1.
        .testTarget(
            name: "TesseraServerTests",
            dependencies: [
                "TesseraServer", "TesseraEvents", "Tessera", "TesseraTesting", "DASHEntity", "MetalinkEntity",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The fleet: the lease policy as a value, then the queue and real `tessera serve --fleet`
        // workers against a PostgreSQL 15 of each test's own.
        .testTarget(
            name: "TesseraFleetTests",
            dependencies: [
                "TesseraFleet", "Tessera", "TesseraTesting",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "TesseraTestingTests",
            dependencies: ["Tessera", "TesseraTesting"]
        ),
    ]
)
