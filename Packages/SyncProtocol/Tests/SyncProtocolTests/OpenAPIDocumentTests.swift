import Foundation
import OpenAPIKit
import Testing

@testable import SyncProtocol

@Suite struct OpenAPIDocumentTests {
    static func document() throws -> OpenAPI.Document {
        try JSONDecoder().decode(OpenAPI.Document.self, from: Data(OpenAPIDocument.json.utf8))
    }

    @Test func isValidOpenAPI31() throws {
        let document = try Self.document()
        #expect(document.openAPIVersion == .v3_1_0)
        try document.validate()
    }

    @Test func describesExactlyTheListedOperations() throws {
        let document = try Self.document()
        var operations: [String] = []
        for (path, item) in document.paths {
            guard let item = item.pathItemValue else { continue }
            for endpoint in item.endpoints {
                operations.append("\(endpoint.method.rawValue.uppercased()) \(path.rawValue)")
            }
        }
        #expect(operations.sorted() == OpenAPIDocument.operations.sorted())
    }

    @Test func listsEveryErrorCodeAndRejectionCode() throws {
        let text = OpenAPIDocument.json
        for code in ErrorCode.requestCodes + ErrorCode.rejectionCodes {
            #expect(text.contains("\"\(code.rawValue)\""), "\(code) is not in the document")
        }
        let limits = ProtocolLimits.standard
        #expect(text.contains("\"maxItems\": \(limits.maxEventsPerPush)"))
        #expect(text.contains("\"maximum\": \(limits.maxPullLimit)"))
        #expect(text.contains("\"maximum\": \(limits.maxWaitSeconds)"))
    }

    @Test func everyRequestCodeHasAStatusAndRejectionCodesDoNotExceptScope() {
        for code in ErrorCode.requestCodes {
            #expect(code.httpStatus != nil, "\(code)")
        }
        #expect(ErrorCode.validationFailed.httpStatus == nil)
        #expect(ErrorCode.conflictVersion.httpStatus == nil)
        #expect(ErrorCode.eventInvalid.httpStatus == nil)
        #expect(ErrorCode.scopeForbidden.httpStatus == 403)
    }
}
