#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a `pthread_mutex_t`: the one lock of the package.
///
/// Not `Synchronization.Mutex`: on Linux that locks with raw `futex` calls, which
/// ThreadSanitizer cannot see, so every access under it is reported as a race and `make check`
/// drowns in false reports. A pthread mutex is what TSan understands, and uncontended it costs
/// the same (a compare-and-swap each way).
///
/// The value and its mutex live in one allocation (a `ManagedBuffer` whose header is the value
/// and whose one element is the mutex): a run of a small file makes about ten of these, and a
/// mutex allocated on its own was one more `malloc` and `free` each. Copies of a `Locked` share
/// the one value and lock.
///
/// Keep the closures short and never `await` or block in them: they run with the lock held.
package struct Locked<Value>: @unchecked Sendable {
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                _ = mutex.deinitialize(count: 1)
            }
        }
    }

    private let storage: Storage

    /// A lock guarding `value`.
    package init(_ value: Value) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in value }, to: Storage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            let status = pthread_mutex_init(mutex, nil)
            precondition(status == 0, "pthread_mutex_init failed: \(status)")
        }
    }

    /// Runs `body` with the value, the lock held.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        // (The pointers stay valid while `storage` is held, as it is for this call.)
        let (value, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
