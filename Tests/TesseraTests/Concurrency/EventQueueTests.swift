import Testing
@testable import Tessera

/// The queue that carries a run's events, the manager's inbox and every event subscriber:
/// order, batches, the end, cancellation.
@Suite struct EventQueueTests {
    @Test func valuesPostedBeforeATakeComeAsOneBatchInOrder() async {
        let queue = EventQueue<Int>()
        for value in 1...5 { queue.post(value) }
        #expect(await queue.take() == [1, 2, 3, 4, 5])
        queue.post(6)
        #expect(await queue.take() == [6])
    }

    @Test func aTakeWaitsForTheNextPost() async {
        let queue = EventQueue<Int>()
        let taker = Task { await queue.take() }
        // Whether the taker already waits or not, it gets the value.
        await Task.yield()
        queue.post(7)
        #expect(await taker.value == [7])
    }

    @Test func finishLetsTheConsumerTakeWhatIsLeftThenEnds() async {
        let queue = EventQueue<String>()
        queue.post("a")
        queue.finish()
        #expect(queue.post("b") == false)
        #expect(await queue.take() == ["a"])
        #expect(await queue.take() == nil)
        #expect(await queue.take() == nil)
    }

    @Test func finishWakesAWaitingConsumer() async {
        let queue = EventQueue<Int>()
        let taker = Task { await queue.take() }
        await Task.yield()
        queue.finish()
        #expect(await taker.value == nil)
    }

    @Test func cancellingAWaitingConsumerEndsItsWait() async {
        let queue = EventQueue<Int>()
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let taker = Task {
            signal.yield()
            return await queue.take()
        }
        for await _ in started { break }
        taker.cancel()
        #expect(await taker.value == nil)
        // The queue itself is not ended: a new consumer gets later values.
        queue.post(1)
        #expect(await queue.take() == [1])
    }

    @Test func aCancelledConsumerStillGetsWhatIsThere() async {
        let queue = EventQueue<Int>()
        queue.post(1)
        let taker = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await queue.take()
        }
        #expect(await taker.value == [1])
    }

    @Test func manyProducersLoseNothingAndKeepEachOnesOrder() async {
        let queue = EventQueue<(producer: Int, value: Int)>()
        let producers = 8, values = 2_000
        let consumer = Task { () -> [[Int]] in
            var seen = Array(repeating: [Int](), count: producers)
            var iterator = queue.makeIterator()
            while let item = await iterator.next() { seen[item.producer].append(item.value) }
            return seen
        }
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<producers {
                group.addTask { for value in 0..<values { queue.post((producer, value)) } }
            }
        }
        queue.finish()
        let seen = await consumer.value
        for producer in 0..<producers { #expect(seen[producer] == Array(0..<values)) }
    }

    @Test func theIteratorHandsOutABatchValueByValue() async {
        let queue = EventQueue<Int>()
        var iterator = queue.makeIterator()
        queue.post(1)
        queue.post(2)
        #expect(await iterator.next() == 1)
        queue.post(3)
        #expect(await iterator.next() == 2)
        #expect(await iterator.next() == 3)
        queue.finish()
        #expect(await iterator.next() == nil)
    }
}
