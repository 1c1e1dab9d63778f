import Testing
@testable import DASHEntity
