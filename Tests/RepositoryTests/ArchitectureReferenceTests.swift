import Foundation
import SyncTestSupport
import Testing

/// `docs/ARCHITECTURE.md` is read as a map of the code, so every file and Swift symbol it names in backquotes
/// must exist, and a symbol it places in a file must be declared there. What counts as a reference is
/// `ReferenceCheck.reference(_:)`; how each is looked up is `ReferenceCheck.staleReferences(in:at:)`.
@Suite(.onOwnThreads) struct ArchitectureReferenceTests {
    static let root = RepositoryLayoutTests.root
    static let document = "docs/ARCHITECTURE.md"

    /// The index is built once: it reads every Swift file of the repository.
    static let index = Result { try RepositoryIndex(root: root) }

    static func stale(_ text: String) throws -> [String] {
        ReferenceCheck(index: try index.get()).staleReferences(in: text, at: document)
    }

    @Test func everyFileAndSymbolTheArchitectureNamesExists() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(Self.document), encoding: .utf8)
        let check = ReferenceCheck(index: try Self.index.get())
        // Guards against a check that finds nothing to check.
        let spans = check.spans(in: text)
        let kinds = spans.compactMap { ReferenceCheck.reference($0.text) }
        #expect(kinds.filter { if case .path = $0 { true } else { false } }.count > 100)
        #expect(kinds.filter { if case .symbol = $0 { true } else { false } }.count > 200)
        let stale = check.staleReferences(in: text, at: Self.document)
        #expect(stale.isEmpty, "stale references:\n\(stale.joined(separator: "\n"))")
        // Every name the check takes as declared outside the repository is still named by the document.
        for name in ReferenceCheck.declaredElsewhere.keys.sorted() {
            #expect(spans.contains { $0.text == name }, "\(name) is no longer named; drop it from declaredElsewhere")
        }
    }

    /// The check fails on each kind of stale reference it claims to catch.
    @Test func theCheckCatchesWhatItClaims() throws {
        let planted = [
            "`Pull/LongPollHub.swift` wakes them": nil,
            "`Pull/NoSuchHub.swift` wakes them": "`Pull/NoSuchHub.swift`",
            "under `Packages/SyncEngine/Sources/NoSuchModule/`": "`Packages/SyncEngine/Sources/NoSuchModule/`",
            "the type `LongPollHub`": nil,
            "the type `LongPollHubs`": "`LongPollHubs`",
            "`LongPollHub.signal`": nil,
            "`LongPollHub.wakeEveryone`": "`LongPollHub.wakeEveryone`",
            "`PullService.signal`": "`PullService.signal`",
            "`EventStore.apply(_:budget:also:)`": nil,
            "`EventStore.apply(_:deadline:)`": "`EventStore.apply(_:deadline:)`",
            "`SyncFailure.from(status:…)`": nil,
            "`pollForChanges`": nil,
            "`pollForChange`": "`pollForChange`",
            "`.noStream`": nil,
            "`.noStreams`": "`.noStreams`",
            // The pairings: a symbol placed in a file that does not declare it.
            "`SyncEngine.pollForChanges` and `applyPolledPages` in `SyncEngine/SyncEngine+LongPoll.swift`": nil,
            "`SyncEngine.pollForChanges` and `applyPolledPages` in `SyncEngine/SyncEngine.swift`":
                "`SyncEngine.pollForChanges` is not declared in `SyncEngine/SyncEngine.swift`",
            "`LongPollHub` (`Pull/PullService.swift`)": "`LongPollHub` is not declared in `Pull/PullService.swift`",
            "`Pull/PullService.swift` (`read`, `LongPollHub`)":
                "`LongPollHub` is not declared in `Pull/PullService.swift`",
            "`Pull/PullService.swift` (`read`, `StablePointCache`)": nil,
            // Links to files and headings.
            "see [PROTOCOL.md](PROTOCOL.md#checksums-addition)": nil,
            "see [PROTOCOL.md](PROTOCOL.md#checksums)": "PROTOCOL.md#checksums",
            "see [the notes](NOTES.md)": "NOTES.md",
            "[below](#glossary)\n\n## Glossary": nil,
            "[below](#glossaries)\n\n## Glossary": "#glossaries",
        ]
        for (line, expected) in planted {
            let stale = try Self.stale(line)
            if let expected {
                #expect(stale.contains { $0.contains(expected) }, "`\(line)` went unnoticed: \(stale)")
            } else {
                #expect(stale.isEmpty, "`\(line)` was reported: \(stale)")
            }
        }
        // Every stale reference is listed, with its line.
        let stale = try Self.stale("`Nowhere.swift` and\n`NoSuchType`, twice: `NoSuchType`.")
        #expect(stale.count == 3 && stale[0].hasPrefix("docs/ARCHITECTURE.md:1:") && stale[2].contains(":2:"))
    }

    /// Spans that are not files or Swift symbols are left alone, so that the document can quote commands,
    /// SQL, wire names and settings.
    @Test func theCheckSkipsWhatIsNotAReference() throws {
        for span in [
            "SYNC_PUSH_GROUP_LANES", "store_meta", "pg_notify", "GET /v1/live", "/v1/sync", "--note-quota",
            "sync-agent status", "note.titleSet", "reset.required", "plan.assignSeqs", "seq", "serve", "GET", "NOTIFY",
            "HASH.part", "<db>.blobs/HASH", "replayOrder = .arrival", "[{hlc, replica, value}]", "0008-checksums",
            "eventstore.v7.event-id-per-scope", "…_ccnew", "head+1 … head+n",
        ] {
            #expect(ReferenceCheck.reference(span) == nil, "`\(span)` is taken for a reference")
        }
        #expect(ReferenceCheck.reference("Blobs/") == .path("Blobs"))
        #expect(ReferenceCheck.reference("Package.swift") == .path("Package.swift"))
        #expect(
            ReferenceCheck.reference("SyncEngine.Configuration.interval")
                == .symbol(.init(names: ["SyncEngine", "Configuration", "interval"], labels: nil, isCase: false)))
        #expect(
            ReferenceCheck.reference("EventStore.apply(_:budget:also:)")
                == .symbol(.init(names: ["EventStore", "apply"], labels: ["_", "budget", "also"], isCase: false)))
        #expect(
            ReferenceCheck.reference("SyncEngine.setLive(false)")
                == .symbol(.init(names: ["SyncEngine", "setLive"], labels: nil, isCase: false)))
        #expect(ReferenceCheck.reference("run()") == .symbol(.init(names: ["run"], labels: [], isCase: false)))
    }

    /// The lexer reads declarations, not comments or strings, and the labels of each function.
    @Test func declarationsAreReadFromCodeOnly() {
        let source = #"""
            /// A `struct Commented` in a comment.
            struct Outer<T>: Sendable {
                enum Kind { case one, two(Int), three = 3 }
                let text = "struct Quoted \(f("func quoted()")) end"
                let raw = #"class RawQuoted "# + """
                    enum MultiLine
                    """
                func apply(_ answer: Int, budget: Budget = .init(), also: (Int) -> Void = { _ in }) {}
                init?(parsing text: [String: Int]) { self.init() }
            }
            extension Outer.Kind { var name: String { "" } }
            """#
        let declarations = SwiftDeclarations(source)
        #expect(declarations.types == ["Outer", "Kind"])
        #expect(declarations.extended == ["Kind"])
        #expect(declarations.members.isSuperset(of: ["one", "two", "three", "text", "raw", "apply", "init", "name"]))
        #expect(!declarations.members.contains("quoted") && !declarations.types.contains("Commented"))
        let apply = [
            Parameter(label: "_", hasDefault: false), Parameter(label: "budget", hasDefault: true),
            Parameter(label: "also", hasDefault: true),
        ]
        #expect(declarations.functions["apply"] == [apply])
        #expect(declarations.functions["init"] == [[.init(label: "parsing", hasDefault: false)]])
    }
}

/// What the repository holds: its paths (what git tracks or would track, and their folders) and the
/// declarations of each of its Swift files.
struct RepositoryIndex: Sendable {
    /// Every file and folder, relative to the root.
    var paths: Set<String> = []
    /// The declarations of each Swift file, by path.
    var declarations: [String: SwiftDeclarations] = [:]
    /// Module names: the folders of every `Sources/` and `Tests/` folder, and the packages of `Packages/`.
    var modules: Set<String> = []
    /// The Swift files declaring each type, and those extending it.
    var declaring: [String: Set<String>] = [:]
    var extending: [String: Set<String>] = [:]

    init(root: URL) throws {
        let (_, data) = try RepositoryLayoutTests.outputBlocking([
            "git", "-C", root.path, "ls-files", "--cached", "--others", "--exclude-standard",
        ])
        for file in String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        where FileManager.default.fileExists(atPath: root.appendingPathComponent(file).path) {
            let parts = file.split(separator: "/").map(String.init)
            for end in parts.indices { paths.insert(parts[...end].joined(separator: "/")) }
            if let at = parts.lastIndex(where: { $0 == "Sources" || $0 == "Tests" }), at + 2 < parts.count {
                modules.insert(parts[at + 1])
            }
            if parts.count > 2 && parts[0] == "Packages" { modules.insert(parts[1]) }
            guard file.hasSuffix(".swift"),
                let text = try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            else { continue }
            add(SwiftDeclarations(text), at: file)
        }
    }

    mutating func add(_ found: SwiftDeclarations, at file: String) {
        declarations[file] = found
        for type in found.types { declaring[type, default: []].insert(file) }
        for type in found.extended { extending[type, default: []].insert(file) }
    }

    /// The paths a document's `cited` path names: the path from the root when its first part is a top-level
    /// entry (`Packages/…`, `docs/…`), otherwise every path ending in it.
    func resolve(_ cited: String) -> [String] {
        if paths.contains(cited) { return [cited] }
        guard let first = cited.split(separator: "/").first, !paths.contains(String(first)) else { return [] }
        return paths.filter { $0.hasSuffix("/" + cited) }
    }

    /// The Swift files at `path` or below it.
    func swiftFiles(at path: String) -> [String] {
        declarations.keys.filter { $0 == path || $0.hasPrefix(path + "/") }
    }
}

/// A function's parameter, as a call sees it.
struct Parameter: Hashable, Sendable {
    /// The argument label; `_` for none.
    var label: String
    var hasDefault: Bool
}

/// The declarations of one Swift file, read by a lexer that skips comments and string literals.
struct SwiftDeclarations: Sendable {
    /// Types the file declares: `struct`, `class`, `enum`, `protocol`, `actor`, `typealias`, `associatedtype`.
    var types: Set<String> = []
    /// Types the file extends (the last part of `extension A.B`).
    var extended: Set<String> = []
    /// Names of functions, properties, constants, cases and initializers (`init`).
    var members: Set<String> = []
    /// The parameters of each declaration of each function and initializer, by name.
    var functions: [String: [[Parameter]]] = [:]
    /// The argument labels of the functions and initializers.
    var labels: Set<String> = []

    enum Token: Equatable {
        case word(String)
        case mark(UInt8)
        case newline
    }

    static let typeKeywords: Set<String> = [
        "struct", "class", "enum", "protocol", "actor", "typealias", "associatedtype",
    ]
    /// Words that follow a declaration's keyword without being its name (`class func`, `case let`).
    static let keywords: Set<String> = typeKeywords.union([
        "func", "var", "let", "case", "init", "extension", "subscript", "static", "is", "_",
    ])

    init(_ text: String) {
        let tokens = Self.tokens(Array(text.utf8))
        func word(_ at: Int) -> String? {
            guard at < tokens.count, case .word(let word) = tokens[at] else { return nil }
            return word
        }
        func follows(_ at: Int, _ mark: Character) -> Bool {
            at > 0 && tokens[at - 1] == .mark(UInt8(ascii: mark.unicodeScalars.first!))
        }
        for at in tokens.indices {
            guard let keyword = word(at), !follows(at, ".") else { continue }
            if Self.typeKeywords.contains(keyword) {
                if let name = word(at + 1), !Self.keywords.contains(name) { types.insert(name) }
            } else if keyword == "extension" {
                var next = at + 1
                var last: String?
                while let name = word(next) {
                    last = name
                    guard next + 2 < tokens.count, tokens[next + 1] == .mark(UInt8(ascii: ".")) else { break }
                    next += 2
                }
                if let last { extended.insert(last) }
            } else if keyword == "func" || keyword == "init" {
                guard let name = keyword == "init" ? "init" : word(at + 1) else { continue }
                members.insert(name)
                if let parameters = Self.parameters(tokens, after: at + 1) {
                    functions[name, default: []].append(parameters)
                    labels.formUnion(parameters.map(\.label).filter { $0 != "_" })
                }
            } else if keyword == "var" || keyword == "let" {
                if let name = word(at + 1), !Self.keywords.contains(name) { members.insert(name) }
            } else if keyword == "case" {
                members.formUnion(Self.cases(tokens, after: at))
            }
        }
    }

    /// The parameters of the first parameter list at or after `start`, past a name and generic parameters.
    static func parameters(_ tokens: [Token], after start: Int) -> [Parameter]? {
        var at = start
        var angles = 0
        while at < tokens.count {
            switch tokens[at] {
            case .mark(UInt8(ascii: "<")): angles += 1
            case .mark(UInt8(ascii: ">")): angles -= 1
            case .mark(UInt8(ascii: "(")) where angles <= 0:
                return parameterList(tokens, from: at)
            case .mark(UInt8(ascii: "{")), .mark(UInt8(ascii: "=")): return nil
            default: break
            }
            at += 1
        }
        return nil
    }

    static func parameterList(_ tokens: [Token], from open: Int) -> [Parameter] {
        var parameters: [Parameter] = []
        var depth = 0
        var label: String?
        var typed = false
        var hasDefault = false
        var at = open
        func finish() {
            if let label { parameters.append(Parameter(label: label, hasDefault: hasDefault)) }
            label = nil
            typed = false
            hasDefault = false
        }
        while at < tokens.count {
            let token = tokens[at]
            let previous = at > 0 ? tokens[at - 1] : .newline
            switch token {
            case .mark(UInt8(ascii: "(")), .mark(UInt8(ascii: "[")), .mark(UInt8(ascii: "{")),
                .mark(UInt8(ascii: "<")):
                depth += 1
            case .mark(UInt8(ascii: ">")) where previous != .mark(UInt8(ascii: "-")):
                depth -= 1
            case .mark(UInt8(ascii: ")")), .mark(UInt8(ascii: "]")), .mark(UInt8(ascii: "}")):
                depth -= 1
                if depth == 0 {
                    finish()
                    return parameters
                }
            case .mark(UInt8(ascii: ",")) where depth == 1:
                finish()
            case .mark(UInt8(ascii: ":")) where depth == 1:
                typed = true
            case .mark(UInt8(ascii: "=")) where depth == 1 && typed:
                hasDefault = true
            case .word(let word) where depth == 1 && label == nil && !typed:
                if previous != .mark(UInt8(ascii: "@")) { label = word }
            default: break
            }
            at += 1
        }
        return parameters
    }

    /// The names a `case` at `start` declares: `case a, b(Int), c = 3` up to the end of its line.
    static func cases(_ tokens: [Token], after start: Int) -> [String] {
        var names: [String] = []
        var at = start + 1
        var depth = 0
        var expectName = true
        while at < tokens.count {
            switch tokens[at] {
            case .newline where depth == 0: return names
            case .mark(UInt8(ascii: ":")) where depth == 0: return names
            case .mark(UInt8(ascii: "(")): depth += 1
            case .mark(UInt8(ascii: ")")): depth -= 1
            case .mark(UInt8(ascii: ",")) where depth == 0: expectName = true
            case .word(let word) where depth == 0 && expectName:
                if keywords.contains(word) { return names }
                names.append(word)
                expectName = false
            case .mark where depth == 0 && expectName: return names
            default: break
            }
            at += 1
        }
        return names
    }

    // MARK: - The lexer

    static func isIdentifier(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
            || byte == 0x5F || byte >= 0x80
    }

    /// Words, marks and line ends of Swift source; comments and string literals are left out.
    static func tokens(_ bytes: [UInt8]) -> [Token] {
        var tokens: [Token] = []
        var at = 0
        while at < bytes.count {
            let byte = bytes[at]
            let next = at + 1 < bytes.count ? bytes[at + 1] : 0
            if byte == UInt8(ascii: "\n") {
                tokens.append(.newline)
                at += 1
            } else if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r") {
                at += 1
            } else if byte == UInt8(ascii: "/") && next == UInt8(ascii: "/") {
                while at < bytes.count && bytes[at] != UInt8(ascii: "\n") { at += 1 }
            } else if byte == UInt8(ascii: "/") && next == UInt8(ascii: "*") {
                at = skipBlockComment(bytes, from: at)
            } else if byte == UInt8(ascii: "\"") || (byte == UInt8(ascii: "#") && startsString(bytes, at)) {
                at = skipString(bytes, from: at)
            } else if byte == UInt8(ascii: "`") {
                var end = at + 1
                while end < bytes.count && bytes[end] != UInt8(ascii: "`") && bytes[end] != UInt8(ascii: "\n") {
                    end += 1
                }
                tokens.append(.word(String(decoding: bytes[(at + 1)..<min(end, bytes.count)], as: UTF8.self)))
                at = end + 1
            } else if isIdentifier(byte) {
                var end = at
                while end < bytes.count && isIdentifier(bytes[end]) { end += 1 }
                if byte >= 0x30 && byte <= 0x39 {
                    // A number: `1_000`, `0x1F`, `2.5e3`.
                    while end < bytes.count && (isIdentifier(bytes[end]) || bytes[end] == UInt8(ascii: ".")) {
                        end += 1
                    }
                } else {
                    tokens.append(.word(String(decoding: bytes[at..<end], as: UTF8.self)))
                }
                at = end
            } else {
                tokens.append(.mark(byte))
                at += 1
            }
        }
        return tokens
    }

    static func startsString(_ bytes: [UInt8], _ at: Int) -> Bool {
        var end = at
        while end < bytes.count && bytes[end] == UInt8(ascii: "#") { end += 1 }
        return end < bytes.count && bytes[end] == UInt8(ascii: "\"")
    }

    static func skipBlockComment(_ bytes: [UInt8], from start: Int) -> Int {
        var depth = 0
        var at = start
        while at + 1 < bytes.count {
            if bytes[at] == UInt8(ascii: "/") && bytes[at + 1] == UInt8(ascii: "*") {
                depth += 1
                at += 2
            } else if bytes[at] == UInt8(ascii: "*") && bytes[at + 1] == UInt8(ascii: "/") {
                depth -= 1
                at += 2
                if depth == 0 { return at }
            } else {
                at += 1
            }
        }
        return bytes.count
    }

    /// The index past the string literal at `start` (`"…"`, `"""…"""`, `#"…"#`), interpolations included.
    static func skipString(_ bytes: [UInt8], from start: Int) -> Int {
        var at = start
        var hashes = 0
        while bytes[at] == UInt8(ascii: "#") {
            hashes += 1
            at += 1
        }
        let quote = UInt8(ascii: "\"")
        let multiline = at + 2 < bytes.count && bytes[at + 1] == quote && bytes[at + 2] == quote
        at += multiline ? 3 : 1
        func hashesFollow(_ from: Int) -> Bool {
            from + hashes <= bytes.count && bytes[from..<(from + hashes)].allSatisfy { $0 == UInt8(ascii: "#") }
        }
        while at < bytes.count {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\\") && hashesFollow(at + 1) {
                let after = at + 1 + hashes
                if after < bytes.count && bytes[after] == UInt8(ascii: "(") {
                    at = skipInterpolation(bytes, from: after)
                } else {
                    at = after + 1
                }
            } else if byte == quote {
                let closes = !multiline || (at + 2 < bytes.count && bytes[at + 1] == quote && bytes[at + 2] == quote)
                let end = at + (multiline ? 3 : 1)
                if closes && hashesFollow(end) { return end + hashes }
                at += 1
            } else if byte == UInt8(ascii: "\n") && !multiline {
                return at
            } else {
                at += 1
            }
        }
        return at
    }

    /// The index past the `)` that closes the interpolation opened at `start`.
    static func skipInterpolation(_ bytes: [UInt8], from start: Int) -> Int {
        var depth = 0
        var at = start
        while at < bytes.count {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") || (byte == UInt8(ascii: "#") && startsString(bytes, at)) {
                at = skipString(bytes, from: at)
                continue
            }
            if byte == UInt8(ascii: "(") { depth += 1 }
            if byte == UInt8(ascii: ")") {
                depth -= 1
                if depth == 0 { return at + 1 }
            }
            at += 1
        }
        return at
    }
}

/// Checks a Markdown document's references against the repository.
///
/// What counts as a reference, in a backquoted span (`reference(_:)`):
/// - **A file or folder**: path characters only (letters, digits, `_ . + -` and `/`), with a `/` or a
///   file's extension (`.swift`, `.md`, `.sh`, `.yml`, `.json`). It names the path from the repository's
///   root when its first part is a top-level entry (`Packages/…`, `docs/…`), otherwise any path that ends in
///   it (`HTTP/SyncAPI.swift`, `EventStore+Sync.swift`).
/// - **A Swift symbol**: names joined by dots, each a Swift identifier without `_`, of one of three shapes:
///   a type first (`LongPollHub`, `EventStore.markRejected`, `SyncEngine.Configuration.interval`); a
///   lowerCamelCase name with a capital or a parenthesis (`pollForChanges`, `run()`); a case with its dot
///   (`.noStream`). It may end in argument labels (`(_:budget:also:)`, `…` for labels left out), which a
///   declaration must accept, or in arguments (`setLive(false)`), where only the name is checked.
///
/// Everything else is left alone, so that the document can quote the other things it must: spans with
/// spaces (commands, SQL, HTTP requests, expressions); names with `_` (SQL tables and columns, environment
/// variables, metrics); names without a lower-case letter (SQL keywords, HTTP methods); dotted names that
/// begin in lower case (event types, error codes, journal kinds such as `note.titleSet` and
/// `reset.required`, or members of a local value, `plan.assignSeqs`); single lower-case words (`seq`,
/// `serve`, `pending`: columns, subcommands, JSON keys and statuses share these with Swift); anything with
/// other characters (`/v1/sync`, `--vacuum`, `sync-agent`).
///
/// How each is looked up (`staleReferences(in:at:)`):
/// - a type is declared (`struct`, `class`, `enum`, `protocol`, `actor`, `typealias`) in some Swift file of
///   the repository, or is a module (a folder of a `Sources/` or `Tests/` folder, or a package), or is one
///   of `declaredElsewhere`;
/// - `A.b` is declared (as a member or a nested type) in a file that declares or extends `A`; a name alone
///   is declared anywhere; with labels, by a function (or, after a type, an initializer) whose parameters
///   take them, the ones left out having defaults;
/// - a symbol the document places in a file or folder is declared there. Three phrasings place it:
///   "`S` in `F`" (also "`S1`, `S2` and `S3` in `F`"), "`S` (`F`" and "`F` (`S1`, `S2`"; a type placed so is
///   declared there, not only extended;
/// - a relative link goes to a file that exists, and its `#anchor` to a heading of that file.
struct ReferenceCheck {
    let index: RepositoryIndex

    /// Types the document names that other packages declare: the module or standard each comes from.
    static let declaredElsewhere = [
        "ByteBuffer": "SwiftNIO",
        "ServiceGroup": "swift-service-lifecycle",
        "ETag": "an HTTP header",
        "Range": "an HTTP header",
    ]

    struct Symbol: Equatable {
        /// The names, `["SyncEngine", "Configuration", "interval"]`.
        var names: [String]
        /// The argument labels cited, `_` for an unlabeled one and `…` for any left out; nil when none are.
        var labels: [String]?
        /// Whether the symbol is a case cited with its leading dot.
        var isCase: Bool
    }

    enum Reference: Equatable {
        case path(String)
        case symbol(Symbol)
    }

    static let fileExtensions = ["swift", "md", "sh", "yml", "yaml", "json"]

    static func isIdentifier(_ text: Substring) -> Bool {
        guard let first = text.first, first.isASCII, first.isLetter else { return false }
        return text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    /// What the backquoted `span` refers to, or nil when it is not a file or a Swift symbol.
    static func reference(_ span: String) -> Reference? {
        let pathCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-/")
        if !span.isEmpty, span.allSatisfy({ pathCharacters.contains($0) }), !span.hasPrefix("/"),
            !span.hasPrefix("-"), span.contains("/") || fileExtensions.contains(where: { span.hasSuffix("." + $0) })
        {
            let path = span.hasSuffix("/") ? String(span.dropLast()) : span
            return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty }
                ? .path(path) : nil
        }
        var text = Substring(span)
        let isCase = text.hasPrefix(".")
        if isCase { text = text.dropFirst() }
        var labels: [String]?
        var hasArguments = false
        if let open = text.firstIndex(of: "("), text.hasSuffix(")") {
            let inside = text[text.index(after: open)..<text.index(before: text.endIndex)]
            text = text[..<open]
            hasArguments = true
            labels = selectorLabels(inside)
        }
        let names = text.split(separator: ".", omittingEmptySubsequences: false)
        guard names.allSatisfy(isIdentifier), let first = names.first else { return nil }
        if isCase {
            guard names.count == 1 else { return nil }
        } else if first.first!.isUppercase {
            guard first.contains(where: \.isLowercase) else { return nil }
        } else {
            guard names.count == 1, hasArguments || first.contains(where: \.isUppercase) else { return nil }
        }
        return .symbol(Symbol(names: names.map(String.init), labels: labels, isCase: isCase))
    }

    /// `_:budget:also:` as `["_", "budget", "also"]`, `status:…` as `["status", "…"]`; nil when `text` is not
    /// labels (arguments, `false`).
    static func selectorLabels(_ text: Substring) -> [String]? {
        var labels: [String] = []
        var rest = text
        while !rest.isEmpty {
            if rest.hasPrefix("…") {
                labels.append("…")
                rest = rest.dropFirst()
                continue
            }
            guard let colon = rest.firstIndex(of: ":") else { return nil }
            let label = rest[..<colon]
            guard label == "_" || (isIdentifier(label)) else { return nil }
            labels.append(String(label))
            rest = rest[rest.index(after: colon)...]
        }
        return labels
    }

    /// Whether a call with `labels` (`…` for any run of them) fits `parameters`: each parameter is matched
    /// in order or left out when it has a default.
    static func accepts(_ parameters: [Parameter], _ labels: [String]) -> Bool {
        guard let label = labels.first else { return parameters.allSatisfy(\.hasDefault) }
        if label == "…" {
            return (0...parameters.count).contains { accepts(Array(parameters[$0...]), Array(labels.dropFirst())) }
        }
        guard let parameter = parameters.first else { return false }
        if parameter.label == label && accepts(Array(parameters.dropFirst()), Array(labels.dropFirst())) {
            return true
        }
        return parameter.hasDefault && accepts(Array(parameters.dropFirst()), labels)
    }

    // MARK: - Reading the document

    /// A backquoted span: its text (white space made single spaces), where it starts, and its line.
    struct Span {
        var text: String
        var range: Range<String.Index>
        var line: Int
    }

    /// The document less its fenced code blocks, each line of them left empty (so line numbers hold).
    static func prose(_ text: String) -> String {
        var inFence = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inFence.toggle()
                return ""
            }
            return inFence ? "" : String(line)
        }.joined(separator: "\n")
    }

    func spans(in text: String) -> [Span] {
        let prose = Self.prose(text)
        var spans: [Span] = []
        var line = 1
        var counted = prose.startIndex
        for match in prose.matches(of: /`([^`]+)`/) {
            line += prose[counted..<match.range.lowerBound].count { $0 == "\n" }
            counted = match.range.lowerBound
            let words = match.output.1.split(whereSeparator: \.isWhitespace)
            spans.append(Span(text: words.joined(separator: " "), range: match.range, line: line))
        }
        return spans
    }

    /// The text between two spans, white space made single spaces.
    static func between(_ text: String, _ from: String.Index, _ to: String.Index) -> String {
        guard from <= to else { return "" }
        let gap = text[from..<to]
        let words = gap.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let padded = (gap.first?.isWhitespace == true ? " " : "") + words
        return padded + (gap.last?.isWhitespace == true && !words.isEmpty ? " " : "")
    }

    /// The pairs of a symbol span and a path span the document places it in, as indexes into `spans`.
    static func placements(_ spans: [Span], references: [Reference?], in text: String) -> [(Int, Int)] {
        let prose = Self.prose(text)
        func gap(_ index: Int) -> String {
            Self.between(prose, spans[index - 1].range.upperBound, spans[index].range.lowerBound)
        }
        func isSymbol(_ index: Int) -> Bool {
            if case .symbol = references[index] { true } else { false }
        }
        var pairs: [(Int, Int)] = []
        for index in spans.indices {
            guard case .path = references[index] else { continue }
            // "`S1`, `S2` and `S3` in `F`"
            if index > 0, gap(index) == " in " {
                var symbol = index - 1
                while symbol >= 0, isSymbol(symbol) {
                    pairs.append((symbol, index))
                    guard symbol > 0, [", ", " and ", ", and "].contains(gap(symbol)) else { break }
                    symbol -= 1
                }
            }
            // "`S` (`F`"
            if index > 0, gap(index) == " (", isSymbol(index - 1) {
                pairs.append((index - 1, index))
            }
            // "`F` (`S1`, `S2`"
            if index + 1 < spans.count, gap(index + 1) == " (" {
                var symbol = index + 1
                while symbol < spans.count {
                    if isSymbol(symbol) { pairs.append((symbol, index)) }
                    guard symbol + 1 < spans.count, gap(symbol + 1) == ", " else { break }
                    symbol += 1
                }
            }
        }
        return pairs
    }

    // MARK: - Looking references up

    /// Why `symbol` does not resolve, or nil when it does.
    func problem(with symbol: Symbol) -> String? {
        let names = symbol.names
        if names.count == 1 {
            let name = names[0]
            if symbol.isCase {
                return index.declarations.values.contains { $0.members.contains(name) } ? nil : "is declared nowhere"
            }
            if name.first!.isUppercase {
                if let labels = symbol.labels {
                    let files = (index.declaring[name] ?? []).union(index.extending[name] ?? [])
                    return files.contains { declares("init", labels: labels, in: $0) }
                        ? nil : "has no initializer taking these labels"
                }
                if index.declaring[name] != nil || index.modules.contains(name) || Self.declaredElsewhere[name] != nil {
                    return nil
                }
                return "is declared nowhere"
            }
            if symbol.labels == nil, index.declarations.values.contains(where: { $0.labels.contains(name) }) {
                return nil
            }
            let found = index.declarations.keys.contains { declares(name, labels: symbol.labels, in: $0) }
            return found ? nil : symbol.labels == nil ? "is declared nowhere" : "is declared nowhere with these labels"
        }
        guard index.declaring[names[0]] != nil || index.extending[names[0]] != nil else {
            return "\(names[0]) is declared nowhere"
        }
        for position in 1..<names.count {
            let owner = names[position - 1]
            let name = names[position]
            let labels = position == names.count - 1 ? symbol.labels : nil
            let files = (index.declaring[owner] ?? []).union(index.extending[owner] ?? [])
            if !files.contains(where: { declares(name, labels: labels, in: $0) }) {
                let what = labels == nil ? name : "\(name)(\(labels!.map { $0 == "…" ? $0 : $0 + ":" }.joined()))"
                return "no file declaring or extending \(owner) declares \(what)"
            }
        }
        return nil
    }

    /// Whether the Swift file at `path` declares `name` (a member or a nested type), taking `labels` when
    /// they are given.
    func declares(_ name: String, labels: [String]?, in path: String) -> Bool {
        guard let found = index.declarations[path] else { return false }
        guard let labels else { return found.members.contains(name) || found.types.contains(name) }
        return (found.functions[name] ?? []).contains { Self.accepts($0, labels) }
    }

    /// Whether `symbol` is declared in one of the Swift files at or below `paths`.
    func isDeclared(_ symbol: Symbol, in paths: [String]) -> Bool {
        let files = paths.flatMap(index.swiftFiles(at:))
        let name = symbol.names.last!
        if symbol.names.count == 1 && name.first!.isUppercase && !symbol.isCase {
            if let labels = symbol.labels { return files.contains { declares("init", labels: labels, in: $0) } }
            return files.contains { index.declarations[$0]?.types.contains(name) == true }
        }
        return files.contains { declares(name, labels: symbol.labels, in: $0) }
    }

    /// The stale references of `text`, the document at `path` (relative to the repository), each as
    /// `path:line: what`, in the document's order.
    func staleReferences(in text: String, at path: String) -> [String] {
        let spans = spans(in: text)
        let references = spans.map { Self.reference($0.text) }
        var stale: [(line: Int, message: String)] = []
        for (span, reference) in zip(spans, references) {
            switch reference {
            case .path(let cited):
                if index.resolve(cited).isEmpty {
                    stale.append((span.line, "`\(span.text)`: no file or folder of the repository has this path"))
                }
            case .symbol(let symbol):
                if let problem = problem(with: symbol) { stale.append((span.line, "`\(span.text)` \(problem)")) }
            case nil: break
            }
        }
        for (symbolIndex, pathIndex) in Self.placements(spans, references: references, in: text) {
            guard case .symbol(let symbol) = references[symbolIndex], case .path(let cited) = references[pathIndex]
            else { continue }
            let paths = index.resolve(cited)
            if !paths.isEmpty && !isDeclared(symbol, in: paths) {
                let span = spans[symbolIndex]
                stale.append((span.line, "`\(span.text)` is not declared in `\(spans[pathIndex].text)`"))
            }
        }
        stale += staleLinks(in: text, at: path)
        return stale.enumerated().sorted { ($0.element.line, $0.offset) < ($1.element.line, $1.offset) }
            .map { "\(path):\($0.element.line): \($0.element.message)" }
    }

    // MARK: - Links

    /// GitHub's anchor for a heading: lower case, punctuation dropped, spaces made hyphens.
    static func anchor(_ heading: String) -> String {
        String(
            heading.lowercased().compactMap { character -> Character? in
                if character == " " { return "-" }
                return character.isLetter || character.isNumber || character == "-" || character == "_"
                    ? character : nil
            })
    }

    static func anchors(_ text: String) -> Set<String> {
        Set(
            prose(text).split(separator: "\n").filter { $0.hasPrefix("#") }.map {
                anchor($0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces))
            })
    }

    /// Relative links (`[text](target)`) to a file that does not exist, or to a heading it does not have.
    func staleLinks(in text: String, at path: String) -> [(line: Int, message: String)] {
        let prose = Self.prose(text)
        let folder = (path as NSString).deletingLastPathComponent
        var stale: [(line: Int, message: String)] = []
        for match in prose.matches(of: /\]\(([^)\s]+)\)/) {
            let target = String(match.output.1)
            guard !target.contains("://"), !target.hasPrefix("mailto:") else { continue }
            let line = prose[..<match.range.lowerBound].count { $0 == "\n" } + 1
            let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
            let file = String(parts[0])
            var linked = text
            if !file.isEmpty {
                let resolved = URL(fileURLWithPath: "/" + folder).appendingPathComponent(file).standardized.path
                let relative = String(resolved.dropFirst()).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                guard index.paths.contains(relative) else {
                    stale.append((line, "link to \(target): no such file"))
                    continue
                }
                guard parts.count > 1, relative.hasSuffix(".md"),
                    let text = try? String(
                        contentsOf: ArchitectureReferenceTests.root.appendingPathComponent(relative), encoding: .utf8)
                else { continue }
                linked = text
            }
            if parts.count > 1, !Self.anchors(linked).contains(String(parts[1])) {
                stale.append((line, "link to \(target): no such heading"))
            }
        }
        return stale
    }
}
