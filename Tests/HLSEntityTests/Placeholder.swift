import Testing
@testable import HLSEntity
