import Testing
@testable import MetalinkEntity
