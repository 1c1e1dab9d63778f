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

        // MARK: Executables
        .executableTarget(
            name: "tessera",
            dependencies: [
                "Tessera",
                "TesseraTesting",
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
        .testTarget(
            name: "TesseraTestingTests",
            dependencies: ["Tessera", "TesseraTesting"]
        ),
    ]
)
