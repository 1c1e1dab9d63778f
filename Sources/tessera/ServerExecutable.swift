import Foundation
import Tessera
import TesseraCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `tessera-server`, the executable that runs `tessera serve`, `fleet` and `demo`: it links the
/// daemon's (Hummingbird, NIO), the fleet's (postgres-nio) and the demo origin's libraries,
/// which every `tessera get` would otherwise load. The Swift runtime looks through every
/// protocol conformance record of the binary the first time it checks a type against a
/// protocol (argument-parser and the session ask hundreds of such questions at each start), and
/// 35 % of the records came from those libraries: without them a one-file `get` runs 16 % fewer
/// instructions. `tessera` replaces itself with `tessera-server` (`execv`: the same process, its
/// pid, signals and exit status, as git runs its `git-*` programs).
enum ServerExecutable {
    /// Replaces this process with `tessera-server` and `arguments` (the first, the program's
    /// name, becomes its path); when it cannot, says why and exits 1.
    static func handOver(_ arguments: [String]) -> Never {
        let this = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? arguments[0]
        let places = CommandMain.serverExecutableCandidates(besides: this)
        let command = arguments.dropFirst().first ?? "serve"
        guard let path = places.first(where: { access($0, X_OK) == 0 }) else {
            Terminal.err("tessera: `\(UntrustedText.printable(command, limit: 40))` is run by \(CommandMain.serverExecutableName), which is in neither \(places.joined(separator: " nor ")) (`make install` puts it in the last)")
            exit(1)
        }
        let argv = ([path] + arguments.dropFirst()).map { strdup($0) } + [nil]
        execv(path, argv)
        Terminal.err("tessera: cannot run \(path): \(String(cString: strerror(errno)))")
        exit(1)
    }
}
