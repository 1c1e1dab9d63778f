import GRDB
import GRDBSQLite

/// A cached statement whose values are bound one after the other, each straight to SQLite with
/// GRDB's own binding of its type (``StatementBinding``), and then run by GRDB.
///
/// The store runs two or three statements of a dozen to twenty values for each task that
/// changes; through `execute(arguments:)`, GRDB boxes each value in an existential, checks their
/// count against the statement's and binds them in a closure nested once per value. On a list of
/// 2,000 small files that was half of the store's instructions and a tenth of the whole
/// command's. Here the count is checked once, when the statement runs, and the values are bound
/// as SQLite copies them (`SQLITE_TRANSIENT`): text from its UTF-8 bytes and length
/// (``bind(_:)-(String?)``), other values as GRDB binds them.
struct BoundStatement {
    private let statement: Statement
    private var count: CInt = 0
    /// SQLite's answer to the first bind that failed.
    private var failure: CInt?

    /// Starts binding `statement`'s values: its earlier ones are cleared.
    init(_ statement: Statement) {
        // (No values: GRDB resets the statement, clears its bindings and from then on runs it
        // with what is bound, without binding again.)
        statement.setUncheckedArguments(StatementArguments())
        self.statement = statement
    }

    /// Binds the next value (`nil` as SQL NULL).
    mutating func bind<Value: StatementBinding>(_ value: Value?) {
        count += 1
        note(value.map { $0.bind(to: statement.sqliteStatement, at: count) } ?? sqlite3_bind_null(statement.sqliteStatement, count))
    }

    /// Binds the next text (`nil` as SQL NULL) from the string's own UTF-8 bytes, with their
    /// length. GRDB's binding passes the string as a C string: a short string (15 bytes or fewer,
    /// as most of a task's text fields are: its type, state, mode) has no terminating NUL in
    /// memory, so each bind copied it into a new array first, and SQLite then measured it.
    mutating func bind(_ value: String?) {
        count += 1
        guard var value else { return note(sqlite3_bind_null(statement.sqliteStatement, count)) }
        let index = count
        let statement = statement.sqliteStatement
        let code = value.withUTF8 { bytes -> CInt in
            // (An empty buffer may have no address, which SQLite would bind as NULL.)
            guard let base = bytes.baseAddress, bytes.count > 0 else {
                return sqlite3_bind_text(statement, index, "", 0, Self.transient)
            }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(statement, index, $0, CInt(clamping: bytes.count), Self.transient)
            }
        }
        note(code)
    }

    /// Keeps the first bind that failed. (Binding reaches no file: it fails for an index out of
    /// range, which `execute()` reports as a wrong count, or a value too large for SQLite.)
    private mutating func note(_ code: CInt) {
        if code != SQLITE_OK, failure == nil { failure = code }
    }

    /// SQLite's `SQLITE_TRANSIENT`: it copies the bytes before the call returns.
    private static var transient: sqlite3_destructor_type {
        unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
    }

    /// Runs the statement once with the values bound.
    ///
    /// - Throws: a GRDB `DatabaseError` when SQLite fails, when the values bound are not as many
    ///   as the statement's parameters (`SQLITE_MISUSE`) or when one could not be bound (SQLite's
    ///   code); nothing is run then.
    func execute() throws {
        let expected = sqlite3_bind_parameter_count(statement.sqliteStatement)
        guard count == expected else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "wrong number of statement arguments: \(count) bound, \(expected) expected",
                sql: statement.sql)
        }
        if let failure {
            throw DatabaseError(resultCode: ResultCode(rawValue: failure), message: "a value could not be bound", sql: statement.sql)
        }
        try statement.execute()
    }
}
