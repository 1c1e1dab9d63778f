// swift-tools-version:6.0
//
// Tessera: a plugin-extensible download framework for Linux, on libcurl and libxml2.
// The layout is described in README.md ("Layout") and ../shared/DESIGN.md.

import PackageDescription

let package = Package(
    name: "Tessera",
    products: [
        .library(name: "Tessera", targets: ["Tessera"]),
        .library(name: "TesseraTesting", targets: ["TesseraTesting"]),
        .executable(name: "tessera", targets: ["tessera"]),
        .library(name: "PlayurlEntity", targets: ["PlayurlEntity"]),
        .library(name: "DASHEntity", targets: ["DASHEntity"]),
        .library(name: "MetalinkEntity", targets: ["MetalinkEntity"]),
        .library(name: "HLSEntity", targets: ["HLSEntity"]),
        .executable(name: "playurl-sample", targets: ["playurl-sample"]),
        .executable(name: "dash-sample", targets: ["dash-sample"]),
        .executable(name: "metalink-sample", targets: ["metalink-sample"]),
        .executable(name: "hls-sample", targets: ["hls-sample"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
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

        // MARK: Entity plugins, each built only on Tessera's public API, with a sample executable
        // Expectations every plugin's tests share (Swift Testing; not a product).
        .target(name: "TesseraTestSupport", dependencies: ["Tessera"], path: "Tests/TesseraTestSupport"),
        .target(name: "PlayurlEntity", dependencies: ["Tessera"], path: "Plugins/PlayurlEntity"),
        .executableTarget(
            name: "playurl-sample", dependencies: ["PlayurlEntity", "Tessera", "TesseraTesting"], path: "Sources/Samples/playurl-sample"
        ),
        .testTarget(name: "PlayurlEntityTests", dependencies: ["PlayurlEntity", "Tessera", "TesseraTesting", "TesseraTestSupport"]),
        .target(name: "DASHEntity", dependencies: ["Tessera"], path: "Plugins/DASHEntity"),
        .executableTarget(
            name: "dash-sample", dependencies: ["DASHEntity", "Tessera", "TesseraTesting"], path: "Sources/Samples/dash-sample"
        ),
        .testTarget(name: "DASHEntityTests", dependencies: ["DASHEntity", "Tessera", "TesseraTesting", "TesseraTestSupport"]),
        .target(name: "MetalinkEntity", dependencies: ["Tessera"], path: "Plugins/MetalinkEntity"),
        .executableTarget(
            name: "metalink-sample", dependencies: ["MetalinkEntity", "Tessera", "TesseraTesting"], path: "Sources/Samples/metalink-sample"
        ),
        .testTarget(name: "MetalinkEntityTests", dependencies: ["MetalinkEntity", "Tessera", "TesseraTesting", "TesseraTestSupport"]),
        .target(name: "HLSEntity", dependencies: ["Tessera"], path: "Plugins/HLSEntity"),
        .executableTarget(
            name: "hls-sample", dependencies: ["HLSEntity", "Tessera", "TesseraTesting"], path: "Sources/Samples/hls-sample"
        ),
        .testTarget(name: "HLSEntityTests", dependencies: ["HLSEntity", "Tessera", "TesseraTesting", "TesseraTestSupport"]),

        // MARK: Executables
        .executableTarget(
            name: "tessera",
            dependencies: [
                "Tessera",
                "TesseraTesting",
                "PlayurlEntity",
                "DASHEntity",
                "MetalinkEntity",
                "HLSEntity",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
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
            dependencies: ["Tessera", "TesseraTesting"],
            path: "Tests/Helpers/TesseraTestHelper"
        ),
        .testTarget(
            name: "TesseraTests",
            dependencies: ["Tessera", "TesseraTesting"]
        ),
        // Runs the built `tessera` executable, as its users do.
        .testTarget(
            name: "TesseraCLITests",
            dependencies: ["Tessera", "TesseraTesting"]
        ),
        .testTarget(
            name: "TesseraTestingTests",
            dependencies: ["Tessera", "TesseraTesting"]
        ),
    ]
)
