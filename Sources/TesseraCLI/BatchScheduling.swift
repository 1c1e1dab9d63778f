import CTesseraSystem
import Glibc

/// `get`, `cache` and `resume` run their threads as `SCHED_BATCH` (sched(7)), not the default
/// `SCHED_OTHER`: the same share of the CPU and the same nice value, but a thread that wakes does
/// not preempt the one running. A download is a pipeline of threads handing work to one another
/// (the engine's threads, the manager on the cooperative pool, the store's writer): each hand-off
/// woke a thread that took the core from the one that had just handed over. On P1's 2,000 small
/// files (two cores shared with nginx) that was 2,072 context switches a run; as a batch, 1,640,
/// and 1-4 % less wall and 2.5-5.5 % less CPU (three paired sittings; Benchmarks in README.md).
///
/// Only threads in the default class move: a class the user chose (`chrt --idle`, `--fifo`) is
/// left as it is. Threads started later (the engine's, the store's, ffmpeg's for a merge) inherit
/// the class of the thread that starts them. `tessera serve` keeps the default class (its answers
/// to RPC clients and the dashboard are interactive), and the library does not do this: how an
/// application's threads are scheduled is the application's choice.
enum BatchScheduling {
    /// Moves every thread of this process that runs in the default class; how many moved.
    @discardableResult
    static func applyToProcess() -> Int {
        apply(to: processThreads())
    }

    /// Moves each of `threads` (kernel thread ids) that runs in the default class to
    /// `SCHED_BATCH`; how many moved. A thread that ended meanwhile, or a refusal (a seccomp
    /// filter, a container without the call), leaves it as it was.
    @discardableResult
    static func apply(to threads: [pid_t]) -> Int {
        threads.reduce(0) { $0 + (tessera_schedule_as_batch($1) == 1 ? 1 : 0) }
    }

    /// The kernel ids of this process's threads (`/proc/self/task`); empty when it cannot be read.
    static func processThreads() -> [pid_t] {
        guard let directory = opendir("/proc/self/task") else { return [] }
        defer { closedir(directory) }
        var threads: [pid_t] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let id = pid_t(name), id > 0 { threads.append(id) }
        }
        return threads
    }
}
