import Foundation
import GRDB
import Testing
@testable import Tessera

/// The store's statements bound value by value (``BoundStatement``): each value reaches its
/// column as GRDB would bind it, and a wrong count runs nothing.
@Suite struct BoundStatementTests {
    private func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (s TEXT, n INTEGER, d REAL, b BLOB, z TEXT, big INTEGER)")
        }
        return queue
    }

    @Test func eachValueReachesItsColumnAsGRDBWouldBindIt() throws {
        let queue = try database()
        let blob = Data([0, 1, 2, 255])
        try queue.write { db in
            var statement = BoundStatement(try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)"))
            statement.bind("ünïcode \"quoted\"")
            statement.bind(42)
            statement.bind(2.5)
            statement.bind(blob)
            statement.bind(String?.none)
            statement.bind(Int64.max)
            try statement.execute()
            // The same statement again, bound afresh: no value of the first run is left over.
            var again = BoundStatement(try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)"))
            again.bind("")
            again.bind(Int?.none)
            again.bind(-0.0)
            again.bind(Data())
            again.bind("z")
            again.bind(Int64.min)
            try again.execute()
        }
        let rows = try queue.read { db in try Row.fetchAll(db, sql: "SELECT s, n, d, b, z, big, typeof(n), typeof(b) FROM t ORDER BY rowid") }
        #expect(rows.count == 2)
        #expect(rows[0][0] as String? == "ünïcode \"quoted\"")
        #expect(rows[0][1] as Int? == 42)
        #expect(rows[0][2] as Double? == 2.5)
        #expect(rows[0][3] as Data? == blob)
        #expect((rows[0][4] as String?) == nil)
        #expect(rows[0][5] as Int64? == Int64.max)
        #expect(rows[1][0] as String? == "")
        #expect(rows[1][6] as String? == "null")
        #expect(rows[1][4] as String? == "z")
        #expect(rows[1][5] as Int64? == Int64.min)
        // (An empty blob is bound as GRDB binds it.)
        let viaGRDB = try queue.write { db -> String? in
            try db.execute(sql: "INSERT INTO t (b) VALUES (?)", arguments: [Data()])
            return try String.fetchOne(db, sql: "SELECT typeof(b) FROM t ORDER BY rowid DESC LIMIT 1")
        }
        #expect(rows[1][7] as String? == viaGRDB)
    }

    @Test(arguments: [1, 3])
    func aWrongNumberOfValuesRunsNothing(values: Int) throws {
        let queue = try database()
        try queue.write { db in
            var statement = BoundStatement(try db.cachedStatement(sql: "INSERT INTO t (s, n) VALUES (?, ?)"))
            for index in 0..<values { statement.bind(index) }
            #expect {
                try statement.execute()
            } throws: { error in
                (error as? DatabaseError)?.resultCode == .SQLITE_MISUSE
                    && (error as? DatabaseError)?.message?.contains("\(values) bound, 2 expected") == true
            }
        }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 0)
    }
}
