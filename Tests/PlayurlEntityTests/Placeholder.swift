import Testing
@testable import PlayurlEntity
