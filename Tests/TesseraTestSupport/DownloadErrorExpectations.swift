import Tessera
import Testing

/// The ``DownloadError`` `body` throws; records an issue (and returns `nil`) when it throws
/// nothing or another error.
public func downloadError(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> DownloadError? {
    do {
        try body()
        Issue.record("expected a DownloadError, nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as DownloadError {
        return error
    } catch {
        Issue.record("expected a DownloadError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Runs `body` and returns the ``DownloadError`` it throws, recording an issue when it throws
/// nothing, something else, or an error with another code or without `fragments` in its message.
@discardableResult
public func expectDownloadError(
    _ code: DownloadError.Code, _ fragments: String..., sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> DownloadError? {
    guard let error = downloadError(sourceLocation: sourceLocation, body) else { return nil }
    #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(error.message.contains(fragment), "\"\(error.message)\" does not contain \"\(fragment)\"", sourceLocation: sourceLocation)
    }
    return error
}
