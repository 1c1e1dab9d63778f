#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Wake-ups that a thread holds back until the end of a turn of its work: the engine thread
/// finishing a dozen transfers in one turn of its loop wakes each waiting consumer once, after
/// the turn, with everything the turn posted, not once per post (a futex call each, on the
/// thread that moves the bytes).
///
/// Outside ``deferring(_:)`` a wake-up happens at once.
enum WakeBatch {
    private final class Collector {
        var waiters: [UnsafeContinuation<Void, Never>] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Runs `body` with this thread's wake-ups held back, then wakes them, in order.
    static func deferring<Result>(_ body: () throws -> Result) rethrows -> Result {
        let collector = Collector()
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(collector).toOpaque())
        defer {
            pthread_setspecific(key, previous)
            for waiter in collector.waiters { waiter.resume() }
        }
        return try withExtendedLifetime(collector) { try body() }
    }

    /// Wakes `waiter`, now or at the end of this thread's ``deferring(_:)``.
    static func resume(_ waiter: UnsafeContinuation<Void, Never>) {
        if let collector = pthread_getspecific(key) {
            Unmanaged<Collector>.fromOpaque(collector).takeUnretainedValue().waiters.append(waiter)
        } else {
            waiter.resume()
        }
    }
}
