import Foundation

/// Holds an answer of the server to its OpenAPI 3.1 document (`OpenAPIDocument.json`): the status is one the
/// operation lists, the media type one that response lists, a JSON body is valid under the response's schema,
/// and the response's documented headers are present when required and valid when sent.
///
/// A validator of its own, not a package: the document uses a small subset of JSON Schema 2020-12, and
/// owning that subset lets the validator refuse every keyword outside it (`init` throws), so the document
/// cannot grow a constraint the tests would silently not check. The annotations that assert nothing
/// (`description`, `default`, …) are allowed.
///
/// Violations name where they are with a JSON pointer into the body (`/` is the whole body), for example
/// `/scopes/0/head: expected integer, got "7"`.
struct OpenAPIResponseValidator: Sendable {
    /// A defect of the document itself, not of an answer: a keyword the validator does not implement, a
    /// `$ref` that does not resolve, a pattern that does not compile.
    struct DocumentError: Error, CustomStringConvertible, Sendable {
        var description: String
    }

    /// The keywords the validator implements.
    static let assertions: Set<String> = [
        "$ref", "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
        "pattern", "minItems", "maxItems", "uniqueItems", "oneOf", "anyOf", "allOf", "not", "format",
        "propertyNames", "minProperties", "maxProperties",
    ]

    /// The keywords that only annotate (OpenAPI 3.1 keeps `example` as a deprecated annotation).
    static let annotations: Set<String> = [
        "description", "title", "default", "examples", "example", "deprecated", "readOnly", "writeOnly", "$comment",
        "contentMediaType", "contentEncoding",
        // An annotation in JSON Schema 2020-12 (the string's decoded content is not asserted); the live stream's
        // messages are validated against their data schemas by name instead.
        "contentSchema",
    ]

    static let typeNames: Set<String> = ["null", "boolean", "object", "array", "number", "string", "integer"]

    private let document: JSON

    /// Whether an object member that no `properties` of its schema declares, and no `additionalProperties`
    /// admits, is a violation. JSON Schema admits such members; a server that sends one has drifted from its
    /// document all the same (a field clients generated from the document never see), which is what the
    /// tests look for.
    var reportsUndeclaredProperties: Bool

    /// Parses the document and checks every schema in it.
    /// - Throws: `DocumentError` for a document that is not OpenAPI 3.1 JSON, a keyword the validator does not
    ///   implement, a `$ref` that does not resolve or a pattern that does not compile.
    init(documentJSON: Data, reportsUndeclaredProperties: Bool = false) throws {
        do {
            document = try Self.parse(documentJSON)
        } catch let error as ParseError {
            throw DocumentError(description: "the document is not JSON: \(error.description)")
        }
        self.reportsUndeclaredProperties = reportsUndeclaredProperties
        try checkDocument()
    }

    // MARK: Answers

    /// The violations of one answer (empty when it matches the document).
    /// - Parameters:
    ///   - method: the request's method (`GET`).
    ///   - pathTemplate: the operation's path as the document writes it (`/v1/uploads/{id}`).
    ///   - status: the answer's status.
    ///   - contentType: its `Content-Type`, parameters and all; nil when it has none.
    ///   - body: its body, decoded from any `Content-Encoding`. Not read for `HEAD`, whose answers have none.
    ///   - headers: its headers, to check those the response documents; nil leaves headers unchecked.
    /// - Throws: `DocumentError` for a defect of the document met on the way.
    func validate(
        method: String, pathTemplate: String, status: Int, contentType: String?, body: Data,
        headers: [String: String]? = nil
    ) throws -> [String] {
        let operationName = "\(method.uppercased()) \(pathTemplate)"
        guard let operation = try operation(method: method, pathTemplate: pathTemplate) else {
            return ["\(operationName) is not an operation of the document"]
        }
        guard case .object(let responses)? = operation["responses"] else {
            throw DocumentError(description: "\(operationName) has no responses")
        }
        let key = [String(status), "\(status / 100)XX", "\(status / 100)xx", "default"].first { responses[$0] != nil }
        guard let key, let listed = responses[key] else {
            return [
                "status \(status) is not documented (documented: \(responses.keys.sorted().joined(separator: ", ")))"
            ]
        }
        let response = try resolvedObject(listed, at: "\(operationName) \(key)")
        var violations: [String] = []
        if let headers { try check(headers: headers, of: response, into: &violations) }

        let isHead = method.uppercased() == "HEAD"
        guard case .object(let content)? = response["content"], !content.isEmpty else {
            // A HEAD answer carries the headers of the GET it stands for (Content-Type, Content-Length) but no
            // body, and so does an answer the document gives no content: only a body would contradict it.
            if !isHead && !body.isEmpty {
                violations.append(
                    "the document gives status \(status) no content, but the body has \(body.count) bytes")
            }
            return violations
        }
        let documented = content.keys.sorted().joined(separator: ", ")
        guard let contentType, let mediaType = Self.mediaType(contentType) else {
            violations.append("no Content-Type; the document lists \(documented)")
            return violations
        }
        guard case let (mediaKey, mediaObject)? = Self.match(mediaType, in: content) else {
            violations.append("Content-Type \(contentType) is not one the document lists (\(documented))")
            return violations
        }
        guard !isHead, Self.isJSON(mediaKey) else { return violations }
        let value: JSON
        do {
            value = try Self.parse(body)
        } catch let error as ParseError {
            violations.append("the body is not JSON: \(error.description)")
            return violations
        }
        let media = try resolvedObject(mediaObject, at: "\(operationName) \(key) \(mediaKey)")
        if let schema = media["schema"] {
            try validateLocation(schema, value, Pointer(label: "/"), &violations, depth: 0)
        }
        return violations
    }

    /// The violations of `json` under the component schema `name` (`#/components/schemas/<name>`): for what
    /// no response carries whole, such as the data of the live stream's messages.
    /// - Throws: `DocumentError` when the document has no such schema, or for a defect of it.
    func validate(schemaNamed name: String, json: Data) throws -> [String] {
        let schema = try resolve("#/components/schemas/\(Self.escape(name))")
        let value: JSON
        do {
            value = try Self.parse(json)
        } catch let error as ParseError {
            return ["not JSON: \(error.description)"]
        }
        var violations: [String] = []
        try validateLocation(schema, value, Pointer(label: "/"), &violations, depth: 0)
        return violations
    }

    /// The keys of the operation's `responses` ("200", "4XX", "default"…), nil when the document has no such
    /// operation.
    func documentedStatuses(method: String, pathTemplate: String) throws -> [String]? {
        guard let operation = try operation(method: method, pathTemplate: pathTemplate),
            case .object(let responses)? = operation["responses"]
        else { return nil }
        return responses.keys.sorted()
    }

    private func operation(method: String, pathTemplate: String) throws -> [String: JSON]? {
        guard case .object(let root) = document, case .object(let paths)? = root["paths"],
            let item = paths[pathTemplate]
        else { return nil }
        let pathItem = try resolvedObject(item, at: pathTemplate)
        guard case .object(let operation)? = pathItem[method.lowercased()] else { return nil }
        return operation
    }

    /// Checks the documented headers of `response` against `headers` (names in any case). `Content-Type` is
    /// left to the content, as OpenAPI says.
    private func check(headers: [String: String], of response: [String: JSON], into violations: inout [String])
        throws
    {
        guard case .object(let documented)? = response["headers"] else { return }
        let actual = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { "\($0), \($1)" })
        for (name, value) in documented.sorted(by: { $0.key < $1.key }) where name.lowercased() != "content-type" {
            let header = try resolvedObject(value, at: "header \(name)")
            guard let text = actual[name.lowercased()] else {
                if header["required"] == .bool(true) { violations.append("header \(name): required, but missing") }
                continue
            }
            guard let schema = header["schema"] else { continue }
            // A header is text: read it as a number where the schema wants one, so that `Retry-After: 1` is the
            // integer 1 and `Retry-After: soon` the string it is.
            var instance = JSON.string(text)
            if try wantsNumber(schema), case .number(let number)? = try? Self.parse(Data(text.utf8)) {
                instance = .number(number)
            }
            try validateLocation(schema, instance, Pointer(label: "header \(name)"), &violations, depth: 0)
        }
    }

    private func wantsNumber(_ schema: JSON) throws -> Bool {
        guard case .object(let keywords) = schema else { return false }
        if case .string(let reference)? = keywords["$ref"] { return try wantsNumber(try resolve(reference)) }
        switch keywords["type"] {
        case .string(let name)?: return name == "integer" || name == "number"
        case .array(let names)?: return names.contains(.string("integer")) || names.contains(.string("number"))
        default: return false
        }
    }

    // MARK: Media types

    /// `type/subtype` of a `Content-Type`, lowercased, without parameters.
    static func mediaType(_ contentType: String) -> String? {
        let type = contentType.split(separator: ";", omittingEmptySubsequences: false)[0]
            .trimmingCharacters(in: .whitespaces).lowercased()
        let parts = type.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return type
    }

    /// The documented media type `mediaType` falls under: itself first, then `type/*`, then `*/*`.
    static func match(_ mediaType: String, in content: [String: JSON]) -> (String, JSON)? {
        let keys = Dictionary(
            content.map { (Self.mediaType($0.key) ?? $0.key.lowercased(), ($0.key, $0.value)) },
            uniquingKeysWith: { first, _ in first })
        let type = mediaType.split(separator: "/")[0]
        for candidate in [mediaType, "\(type)/*", "*/*"] {
            if let found = keys[candidate] { return found }
        }
        return nil
    }

    static func isJSON(_ mediaKey: String) -> Bool {
        let type = mediaType(mediaKey) ?? mediaKey
        return type == "application/json" || type.hasSuffix("+json")
    }

    // MARK: References

    /// The value a local reference (`#/components/schemas/Event`) points at.
    private func resolve(_ reference: String) throws -> JSON {
        guard reference.hasPrefix("#") else {
            throw DocumentError(description: "\(reference): only references into the document are supported")
        }
        var value = document
        let path = reference.dropFirst()
        guard !path.isEmpty else { return value }
        guard path.hasPrefix("/") else { throw DocumentError(description: "\(reference) is not a JSON pointer") }
        for token in path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let name = (String(token).removingPercentEncoding ?? String(token))
                .replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            switch value {
            case .object(let members) where members[name] != nil:
                value = members[name]!
            case .array(let items) where Int(name).map({ items.indices.contains($0) }) == true:
                value = items[Int(name)!]
            default:
                throw DocumentError(description: "\(reference) does not resolve")
            }
        }
        return value
    }

    /// An object of the document (a path item, a response, a header), through its `$ref` chain.
    private func resolvedObject(_ value: JSON, at location: String) throws -> [String: JSON] {
        var value = value
        for _ in 0..<32 {
            guard case .object(let members) = value else {
                throw DocumentError(description: "\(location) is not an object")
            }
            guard case .string(let reference)? = members["$ref"] else { return members }
            value = try resolve(reference)
        }
        throw DocumentError(description: "\(location): a $ref chain that does not end")
    }

    static func escape(_ token: String) -> String {
        token.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    // MARK: Checking the document

    /// Checks every schema of the document: those of `components/schemas`, and every `schema` member of the
    /// paths and of the other components (parameters, request bodies, responses, headers); and that every
    /// `$ref` outside them resolves.
    private func checkDocument() throws {
        guard case .object(let root) = document, case .string(let version)? = root["openapi"],
            version.hasPrefix("3.1.")
        else { throw DocumentError(description: "not an OpenAPI 3.1 document") }
        guard case .object(let paths)? = root["paths"] else { throw DocumentError(description: "no paths") }
        let components: [String: JSON]
        if case .object(let members)? = root["components"] { components = members } else { components = [:] }
        if case .object(let schemas)? = components["schemas"] {
            for (name, schema) in schemas.sorted(by: { $0.key < $1.key }) {
                try checkSchema(schema, at: "#/components/schemas/\(Self.escape(name))")
            }
        }
        try walk(.object(paths), at: "#/paths")
        for (name, value) in components.sorted(by: { $0.key < $1.key }) where name != "schemas" {
            try walk(value, at: "#/components/\(Self.escape(name))")
        }
    }

    private func walk(_ value: JSON, at location: String) throws {
        switch value {
        case .object(let members):
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                let here = "\(location)/\(Self.escape(key))"
                switch key {
                case "schema": try checkSchema(member, at: here)
                case "$ref":
                    guard case .string(let reference) = member else {
                        throw DocumentError(description: "\(here) is not a string")
                    }
                    _ = try resolve(reference)
                // Examples are data, not document: a `schema` member in one is not a schema.
                case "example", "examples": continue
                default: try walk(member, at: here)
                }
            }
        case .array(let items):
            for (index, item) in items.enumerated() { try walk(item, at: "\(location)/\(index)") }
        default:
            break
        }
    }

    /// Checks one schema and its subschemas: known keywords only, each with a value of its kind.
    private func checkSchema(_ schema: JSON, at location: String) throws {
        guard case .object(let keywords) = schema else {
            if case .bool = schema { return }
            throw DocumentError(description: "\(location) is not a schema")
        }
        func fail(_ key: String, _ problem: String) -> DocumentError {
            DocumentError(description: "\(location)/\(Self.escape(key)) \(problem)")
        }
        for (key, value) in keywords.sorted(by: { $0.key < $1.key }) {
            let here = "\(location)/\(Self.escape(key))"
            guard Self.assertions.contains(key) || Self.annotations.contains(key) else {
                throw fail(key, "is a keyword the validator does not implement (it would be ignored)")
            }
            switch key {
            case "$ref":
                guard case .string(let reference) = value else { throw fail(key, "is not a string") }
                let target = try resolve(reference)
                guard case .object = target else {
                    if case .bool = target { continue }
                    throw fail(key, "points at \(reference), which is not a schema")
                }
            case "type":
                let names: [JSON]
                if case .array(let items) = value { names = items } else { names = [value] }
                for name in names {
                    guard case .string(let text) = name, Self.typeNames.contains(text) else {
                        throw fail(key, "names no JSON Schema type")
                    }
                }
            case "properties":
                guard case .object(let properties) = value else { throw fail(key, "is not an object") }
                for (name, subschema) in properties.sorted(by: { $0.key < $1.key }) {
                    try checkSchema(subschema, at: "\(here)/\(Self.escape(name))")
                }
            case "additionalProperties", "items", "propertyNames", "not":
                try checkSchema(value, at: here)
            case "prefixItems", "allOf", "anyOf", "oneOf":
                guard case .array(let subschemas) = value, !subschemas.isEmpty else {
                    throw fail(key, "is not a non-empty array")
                }
                for (index, subschema) in subschemas.enumerated() { try checkSchema(subschema, at: "\(here)/\(index)") }
            case "required":
                guard case .array(let names) = value, names.allSatisfy({ if case .string = $0 { true } else { false } })
                else { throw fail(key, "is not an array of strings") }
            case "enum":
                guard case .array = value else { throw fail(key, "is not an array") }
            case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
                // A boolean exclusiveMinimum is OpenAPI 3.0's form; 3.1 (JSON Schema 2020-12) takes the bound.
                guard case .number(let number) = value else { throw fail(key, "is not a number") }
                if key == "multipleOf" && !(number.value > 0) { throw fail(key, "is not positive") }
            case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
                guard case .number(let number) = value, number.isInteger, number.value >= 0 else {
                    throw fail(key, "is not a non-negative integer")
                }
            case "uniqueItems":
                guard case .bool = value else { throw fail(key, "is not a boolean") }
            case "pattern":
                guard case .string(let pattern) = value else { throw fail(key, "is not a string") }
                do {
                    _ = try NSRegularExpression(pattern: pattern)
                } catch {
                    throw fail(key, "does not compile: \(pattern)")
                }
            case "format":
                guard case .string = value else { throw fail(key, "is not a string") }
            default:
                continue
            }
        }
    }

    // MARK: Validating

    /// Where a value is: a label (`/` for a body, `header Retry-After`) and a JSON pointer below it.
    private struct Pointer {
        var label: String
        var path = ""

        func appending(_ token: String) -> Pointer {
            Pointer(label: label, path: path + "/" + OpenAPIResponseValidator.escape(token))
        }

        func appending(_ index: Int) -> Pointer { Pointer(label: label, path: path + "/\(index)") }

        var text: String {
            if path.isEmpty { return label }
            return label == "/" ? path : "\(label) \(path)"
        }
    }

    /// The members of an object that the keywords applied to it in place (through `$ref`, `allOf`, `anyOf`,
    /// `oneOf`) declared or admitted: what `reportsUndeclaredProperties` holds the others against, as JSON
    /// Schema's `unevaluatedProperties` would.
    private struct Evaluated {
        var names: Set<String> = []
        /// `additionalProperties` admitted every member.
        var all = false
        /// Some `properties` applied: a schema without any (`{"type": "object"}`, an event's payload) declares
        /// nothing to hold members against.
        var declared = false

        mutating func merge(_ other: Evaluated) {
            names.formUnion(other.names)
            all = all || other.all
            declared = declared || other.declared
        }
    }

    /// Validates `instance` under `schema` at a location of its own (the whole body, a member, an item):
    /// `evaluate`, then the members nothing declared.
    private func validateLocation(
        _ schema: JSON, _ instance: JSON, _ pointer: Pointer, _ violations: inout [String], depth: Int
    ) throws {
        let evaluated = try evaluate(schema, instance, pointer, &violations, depth: depth)
        guard reportsUndeclaredProperties, case .object(let members) = instance, evaluated.declared, !evaluated.all
        else { return }
        for name in members.keys.sorted() where !evaluated.names.contains(name) {
            violations.append("\(pointer.appending(name).text): a member the schema does not declare")
        }
    }

    /// Applies every keyword of `schema` to `instance`, appending what fails to `violations`.
    private func evaluate(
        _ schema: JSON, _ instance: JSON, _ pointer: Pointer, _ violations: inout [String], depth: Int
    ) throws -> Evaluated {
        // Deep enough for any body; reached only by a `$ref` cycle that never moves into the instance.
        guard depth < 512 else { throw DocumentError(description: "a $ref cycle at \(pointer.text)") }
        let at = pointer.text
        var evaluated = Evaluated()
        switch schema {
        case .bool(true): return evaluated
        case .bool(false):
            violations.append("\(at): no value is allowed here, got \(Self.render(instance))")
            return evaluated
        case .object(let keywords):
            for key in keywords.keys.sorted() where !Self.assertions.contains(key) && !Self.annotations.contains(key) {
                throw DocumentError(description: "the keyword \(key) (at \(at)) is not implemented")
            }
            if let value = keywords["$ref"] {
                guard case .string(let reference) = value else { throw DocumentError(description: "$ref at \(at)") }
                evaluated.merge(try evaluate(try resolve(reference), instance, pointer, &violations, depth: depth + 1))
            }
            checkGeneric(keywords, instance, at, &violations)
            switch instance {
            case .number(let number): checkNumber(keywords, number, at, &violations)
            case .string(let text): checkString(keywords, text, at, &violations)
            case .array(let items):
                try checkArray(keywords, items, pointer, &violations, depth: depth)
            case .object(let members):
                evaluated.merge(try checkObject(keywords, members, pointer, &violations, depth: depth))
            case .null, .bool: break
            }
            evaluated.merge(try checkCombinations(keywords, instance, pointer, &violations, depth: depth))
            return evaluated
        default:
            throw DocumentError(description: "the schema at \(at) is not a schema")
        }
    }

    /// `type`, `enum`, `const`.
    private func checkGeneric(_ keywords: [String: JSON], _ instance: JSON, _ at: String, _ violations: inout [String])
    {
        if let type = keywords["type"] {
            var names: [String] = []
            if case .string(let name) = type { names = [name] }
            if case .array(let items) = type {
                names = items.compactMap { if case .string(let name) = $0 { name } else { nil } }
            }
            if !names.contains(where: { Self.isOfType(instance, $0) }) {
                violations.append("\(at): expected \(names.joined(separator: " or ")), got \(Self.render(instance))")
            }
        }
        if case .array(let values)? = keywords["enum"], !values.contains(instance) {
            let listed = values.prefix(8).map(Self.render).joined(separator: ", ")
            let more = values.count > 8 ? ", … (\(values.count) values)" : ""
            violations.append("\(at): \(Self.render(instance)) is not one of [\(listed)\(more)]")
        }
        if let value = keywords["const"], value != instance {
            violations.append("\(at): expected \(Self.render(value)), got \(Self.render(instance))")
        }
    }

    static func isOfType(_ instance: JSON, _ type: String) -> Bool {
        switch (type, instance) {
        case ("null", .null), ("boolean", .bool), ("object", .object), ("array", .array), ("number", .number),
            ("string", .string):
            return true
        case ("integer", .number(let number)): return number.isInteger
        default: return false
        }
    }

    private func checkNumber(_ keywords: [String: JSON], _ number: Number, _ at: String, _ violations: inout [String]) {
        let value = number.value
        func bound(_ key: String) -> Double? {
            if case .number(let limit)? = keywords[key] { limit.value } else { nil }
        }
        if let limit = bound("minimum"), value < limit {
            violations.append("\(at): \(number.text) is less than the minimum \(Self.format(limit))")
        }
        if let limit = bound("maximum"), value > limit {
            violations.append("\(at): \(number.text) is more than the maximum \(Self.format(limit))")
        }
        if let limit = bound("exclusiveMinimum"), value <= limit {
            violations.append("\(at): \(number.text) is not more than \(Self.format(limit))")
        }
        if let limit = bound("exclusiveMaximum"), value >= limit {
            violations.append("\(at): \(number.text) is not less than \(Self.format(limit))")
        }
        if let divisor = bound("multipleOf") {
            let quotient = value / divisor
            if !quotient.isFinite || abs(quotient - quotient.rounded()) > 1e-9 * max(1, abs(quotient)) {
                violations.append("\(at): \(number.text) is not a multiple of \(Self.format(divisor))")
            }
        }
    }

    private func checkString(_ keywords: [String: JSON], _ text: String, _ at: String, _ violations: inout [String]) {
        // JSON Schema counts characters as code points.
        let length = text.unicodeScalars.count
        if case .number(let limit)? = keywords["minLength"], Double(length) < limit.value {
            violations.append("\(at): \(Self.render(.string(text))) is shorter than \(limit.text) characters")
        }
        if case .number(let limit)? = keywords["maxLength"], Double(length) > limit.value {
            violations.append("\(at): \(Self.render(.string(text))) is longer than \(limit.text) characters")
        }
        if case .string(let pattern)? = keywords["pattern"] {
            // JSON Schema's pattern is a search, not a whole match: anchors are the pattern's own (`^…$`).
            let expression = try? NSRegularExpression(pattern: pattern)
            let range = NSRange(text.startIndex..<text.endIndex, in: text)
            if expression?.firstMatch(in: text, range: range) == nil {
                violations.append("\(at): \(Self.render(.string(text))) does not match \(pattern)")
            }
        }
        if case .string(let format)? = keywords["format"] {
            switch format {
            case "date-time" where !Self.isDateTime(text):
                violations.append("\(at): \(Self.render(.string(text))) is not an RFC 3339 date-time")
            case "uuid" where !Self.isUUID(text):
                violations.append("\(at): \(Self.render(.string(text))) is not a UUID")
            default:
                // Other formats (binary, …) only annotate, as JSON Schema 2020-12 has it by default.
                break
            }
        }
    }

    private func checkArray(
        _ keywords: [String: JSON], _ items: [JSON], _ pointer: Pointer, _ violations: inout [String], depth: Int
    ) throws {
        let at = pointer.text
        var prefix = 0
        if case .array(let schemas)? = keywords["prefixItems"] {
            prefix = min(schemas.count, items.count)
            for index in 0..<prefix {
                try validateLocation(
                    schemas[index], items[index], pointer.appending(index), &violations, depth: depth + 1)
            }
        }
        if let schema = keywords["items"] {
            for index in items.indices.dropFirst(prefix) {
                try validateLocation(schema, items[index], pointer.appending(index), &violations, depth: depth + 1)
            }
        }
        if case .number(let limit)? = keywords["minItems"], Double(items.count) < limit.value {
            violations.append("\(at): \(items.count) items, fewer than \(limit.text)")
        }
        if case .number(let limit)? = keywords["maxItems"], Double(items.count) > limit.value {
            violations.append("\(at): \(items.count) items, more than \(limit.text)")
        }
        if keywords["uniqueItems"] == .bool(true) {
            outer: for first in items.indices {
                for second in items.indices where second > first && items[first] == items[second] {
                    violations.append("\(at): items \(first) and \(second) are equal")
                    break outer
                }
            }
        }
    }

    private func checkObject(
        _ keywords: [String: JSON], _ members: [String: JSON], _ pointer: Pointer, _ violations: inout [String],
        depth: Int
    ) throws -> Evaluated {
        let at = pointer.text
        var evaluated = Evaluated()
        if case .array(let required)? = keywords["required"] {
            for case .string(let name) in required where members[name] == nil {
                violations.append("\(at): required member \"\(name)\" is missing")
            }
        }
        var declared: Set<String> = []
        if case .object(let properties)? = keywords["properties"] {
            evaluated.declared = true
            declared = Set(properties.keys)
            for (name, value) in members.sorted(by: { $0.key < $1.key }) {
                guard let schema = properties[name] else { continue }
                evaluated.names.insert(name)
                try validateLocation(schema, value, pointer.appending(name), &violations, depth: depth + 1)
            }
        }
        if let schema = keywords["additionalProperties"] {
            evaluated.all = true
            for (name, value) in members.sorted(by: { $0.key < $1.key }) where !declared.contains(name) {
                try validateLocation(schema, value, pointer.appending(name), &violations, depth: depth + 1)
            }
        }
        if let schema = keywords["propertyNames"] {
            for name in members.keys.sorted() {
                var problems: [String] = []
                try validateLocation(schema, .string(name), pointer.appending(name), &problems, depth: depth + 1)
                violations += problems.map { "\($0) (the member's name)" }
            }
        }
        if case .number(let limit)? = keywords["minProperties"], Double(members.count) < limit.value {
            violations.append("\(at): \(members.count) members, fewer than \(limit.text)")
        }
        if case .number(let limit)? = keywords["maxProperties"], Double(members.count) > limit.value {
            violations.append("\(at): \(members.count) members, more than \(limit.text)")
        }
        return evaluated
    }

    /// `allOf`, `anyOf`, `oneOf`, `not`: applied in place, so what their branches evaluate counts for the
    /// location (for `anyOf` and `oneOf`, the branches that match).
    private func checkCombinations(
        _ keywords: [String: JSON], _ instance: JSON, _ pointer: Pointer, _ violations: inout [String], depth: Int
    ) throws -> Evaluated {
        let at = pointer.text
        var evaluated = Evaluated()
        if case .array(let schemas)? = keywords["allOf"] {
            for schema in schemas {
                evaluated.merge(try evaluate(schema, instance, pointer, &violations, depth: depth + 1))
            }
        }
        for key in ["anyOf", "oneOf"] {
            guard case .array(let schemas)? = keywords[key] else { continue }
            var matching: [Evaluated] = []
            var failures: [String] = []
            for (index, schema) in schemas.enumerated() {
                var problems: [String] = []
                let branch = try evaluate(schema, instance, pointer, &problems, depth: depth + 1)
                if problems.isEmpty {
                    matching.append(branch)
                } else {
                    failures.append("[\(index)] \(problems.prefix(3).joined(separator: "; "))")
                }
            }
            if matching.isEmpty {
                violations.append("\(at): matches no schema of \(key): \(failures.joined(separator: " | "))")
            } else if key == "oneOf" && matching.count > 1 {
                violations.append("\(at): matches \(matching.count) schemas of oneOf, not exactly one")
            }
            for branch in matching { evaluated.merge(branch) }
        }
        if let schema = keywords["not"] {
            var problems: [String] = []
            _ = try evaluate(schema, instance, pointer, &problems, depth: depth + 1)
            if problems.isEmpty { violations.append("\(at): matches the schema of not") }
        }
        return evaluated
    }

    // MARK: Formats

    /// RFC 3339 `date-time` (what JSON Schema's `date-time` format is): `2026-11-22T05:06:37.793Z` or with an
    /// offset `+01:00`, a real date, hours to 23, minutes to 59, seconds to 60 (a leap second).
    static func isDateTime(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for index in range {
                guard (0x30...0x39).contains(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        func byte(_ index: Int, _ allowed: String) -> Bool {
            index < bytes.count && allowed.utf8.contains(bytes[index])
        }
        guard let year = number(0..<4), byte(4, "-"), let month = number(5..<7), byte(7, "-"),
            let day = number(8..<10), byte(10, "Tt"), let hour = number(11..<13), byte(13, ":"),
            let minute = number(14..<16), byte(16, ":"), let second = number(17..<19)
        else { return false }
        var index = 19
        if byte(index, ".") {
            index += 1
            let start = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
            guard index > start else { return false }
        }
        if byte(index, "Zz") {
            index += 1
        } else if byte(index, "+-") {
            guard let offsetHour = number(index + 1..<index + 3), byte(index + 3, ":"),
                let offsetMinute = number(index + 4..<index + 6), offsetHour <= 23, offsetMinute <= 59
            else { return false }
            index += 6
        } else {
            return false
        }
        guard index == bytes.count, (1...12).contains(month), hour <= 23, minute <= 59, second <= 60 else {
            return false
        }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }

    /// The text form of a UUID (RFC 9562), any version, in either case.
    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
                else { return false }
            }
        }
        return true
    }

    // MARK: JSON

    /// A JSON value. Nested in the validator so as not to shadow `SyncModels.JSONValue` in the test module.
    indirect enum JSON: Sendable, Equatable {
        case null
        case bool(Bool)
        case number(Number)
        case string(String)
        case array([JSON])
        case object([String: JSON])
    }

    /// A JSON number: its text, as sent, and its value. Equal by value, as JSON Schema compares them (1 and 1.0
    /// are the same number).
    struct Number: Sendable, Equatable {
        var text: String
        var value: Double
        /// Whether the number has no fractional part (JSON Schema's `integer`, which 1.0 is).
        var isInteger: Bool

        static func == (lhs: Number, rhs: Number) -> Bool { lhs.value == rhs.value }
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    /// Parses JSON text (RFC 8259) strictly: one value, nothing after it, valid UTF-8, no repeated member. A
    /// parser of its own rather than `JSONSerialization`, which reads `true` and `1` alike on some platforms
    /// (both `NSNumber`) and so could not tell a boolean from an integer.
    static func parse(_ data: Data) throws -> JSON {
        guard String(data: data, encoding: .utf8) != nil else { throw ParseError(description: "not UTF-8") }
        var parser = Parser(bytes: Array(data))
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("data after the value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func error(_ problem: String) -> ParseError { ParseError(description: "\(problem) at byte \(index)") }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) throws -> JSON {
            guard depth < 512 else { throw error("nesting deeper than 512") }
            guard index < bytes.count else { throw error("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            default: return .number(try number())
            }
        }

        mutating func literal(_ text: String, _ value: JSON) throws -> JSON {
            let expected = Array(text.utf8)
            guard index + expected.count <= bytes.count, Array(bytes[index..<index + expected.count]) == expected
            else { throw error("invalid literal") }
            index += expected.count
            return value
        }

        mutating func object(depth: Int) throws -> JSON {
            index += 1
            var members: [String: JSON] = [:]
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a name") }
                let name = try string()
                guard members[name] == nil else { throw error("the member \"\(name)\" is repeated") }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected :") }
                index += 1
                skipSpace()
                members[name] = try value(depth: depth + 1)
                skipSpace()
                guard index < bytes.count else { throw error("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                } else {
                    throw error("expected , or }")
                }
            }
        }

        mutating func array(depth: Int) throws -> JSON {
            index += 1
            var items: [JSON] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard index < bytes.count else { throw error("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                } else {
                    throw error("expected , or ]")
                }
            }
        }

        mutating func string() throws -> String {
            index += 1
            var scalars = String.UnicodeScalarView()
            var runStart = index
            func flush(_ end: Int) {
                // A run between quotes and escapes starts and ends at ASCII bytes: valid UTF-8 on its own.
                scalars.append(contentsOf: String(decoding: bytes[runStart..<end], as: UTF8.self).unicodeScalars)
            }
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    flush(index)
                    index += 1
                    return String(scalars)
                }
                if byte < 0x20 { throw error("a control character in a string") }
                guard byte == UInt8(ascii: "\\") else {
                    index += 1
                    continue
                }
                flush(index)
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("a lone surrogate") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("a lone surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("a lone surrogate") }
                    scalars.append(scalar)
                default:
                    throw error("an invalid escape")
                }
                runStart = index
            }
            throw error("an unterminated string")
        }

        mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("unexpected end") }
            var value: UInt32 = 0
            for byte in bytes[index..<index + 4] {
                guard let digit = Int(String(UnicodeScalar(byte)), radix: 16) else { throw error("an invalid escape") }
                value = value * 16 + UInt32(digit)
            }
            index += 4
            return value
        }

        mutating func number() throws -> Number {
            let start = index
            func digits() -> Int {
                let first = index
                while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
                return index - first
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, (0x30...0x39).contains(bytes[index]) else { throw error("an invalid value") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                _ = digits()
            }
            var isWhole = true
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { throw error("an invalid number") }
                isWhole = false
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard digits() > 0 else { throw error("an invalid number") }
                isWhole = false
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let value = Double(text), value.isFinite else { throw error("a number out of range") }
            return Number(text: text, value: value, isInteger: isWhole || value.rounded() == value)
        }
    }

    /// A value as it reads in a message: JSON, cut short past 80 characters.
    static func render(_ value: JSON) -> String {
        let text = write(value)
        return text.count > 80 ? String(text.prefix(77)) + "…" : text
    }

    private static func write(_ value: JSON) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number): return number.text
        case .string(let text):
            var escaped = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": escaped += "\\\""
                case "\\": escaped += "\\\\"
                case "\n": escaped += "\\n"
                case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
                default: escaped.unicodeScalars.append(scalar)
                }
            }
            return escaped + "\""
        case .array(let items): return "[" + items.map(write).joined(separator: ",") + "]"
        case .object(let members):
            return "{"
                + members.sorted { $0.key < $1.key }.map { "\(write(.string($0.key))):\(write($0.value))" }
                .joined(separator: ",") + "}"
        }
    }

    private static func format(_ number: Double) -> String {
        number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
    }
}
