import Foundation
import Hummingbird
import SyncProtocol

/// The admin API and the dashboard (docs/PROTOCOL.md, "Admin API"): `GET /v1/admin/status`,
/// `GET /v1/admin/scopes`, `GET /v1/admin/scopes/{scope}/replicas`, and the page at `GET /dashboard` with its
/// script and style sheet, all behind the admin credential (`AdminCredential`). Without an admin token configured
/// every one of them answers 404.
extension SyncAPI {
    func registerAdmin(on router: Router<SyncRequestContext>) {
        router.get("/v1/admin/status") { request, _ in
            let admin = try await self.admitAdmin(request)
            return try self.respondJSON(admin.status(), to: request)
        }
        router.get("/v1/admin/scopes") { request, context in
            let admin = try await self.admitAdmin(request)
            let query = try AdminService.ScopeQuery(
                query: request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) })
            return try self.respondJSON(try await admin.scopes(query, logger: context.logger), to: request)
        }
        router.get("/v1/admin/scopes/{scope}/replicas") { request, context in
            let admin = try await self.admitAdmin(request)
            let parameters = request.uri.queryParameters
            let limit = try Self.integer(parameters["limit"].map(String.init), name: "limit", in: 1...1000) ?? 100
            let offset = try Self.integer(parameters["offset"].map(String.init), name: "offset", in: 0...Int.max) ?? 0
            let scope = context.parameters.get("scope") ?? ""
            let answer = try await admin.replicas(of: scope, limit: limit, offset: offset, logger: context.logger)
            return try self.respondJSON(answer, to: request)
        }
        for page in DashboardPage.allCases {
            router.get(RouterPath(page.path)) { request, _ in
                _ = try await self.admitAdmin(request)
                return page.response
            }
        }
    }

    /// The admin service, once the request carries the admin credential.
    /// - Throws: 404 `route.notFound` when no admin token is configured, `AdminCredential.Refusal` without the
    ///   credential.
    func admitAdmin(_ request: Request) async throws -> AdminService {
        guard let admin, let adminCredential else {
            throw SyncProtocolError(.routeNotFound, "the admin API is off (SYNC_ADMIN_TOKEN is not set)")
        }
        try await adminCredential.check(authorization: request.headers[.authorization], tokens: tokens)
        return admin
    }

    func respondJSON(_ value: some Encodable, to request: Request) throws -> Response {
        var response = try respond(try AdminService.encoder.encode(value), to: request)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    static func integer(_ text: String?, name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw SyncProtocolError(.requestInvalid, "\(name) must be an integer in \(range)")
        }
        return value
    }
}

extension AdminService {
    /// Dates as ISO 8601 text, keys in a fixed order.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

/// The dashboard's files, built into the server (resources embedded in the code: no file to ship beside the
/// binary). Served with a content security policy that lets the page reach its own origin only.
enum DashboardPage: CaseIterable, Sendable {
    case page, script, styles

    var path: String {
        switch self {
        case .page: "/dashboard"
        case .script: "/dashboard/dashboard.js"
        case .styles: "/dashboard/dashboard.css"
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .page: PackageResources.dashboard_html
        case .script: PackageResources.dashboard_js
        case .styles: PackageResources.dashboard_css
        }
    }

    var contentType: String {
        switch self {
        case .page: "text/html; charset=utf-8"
        case .script: "text/javascript; charset=utf-8"
        case .styles: "text/css; charset=utf-8"
        }
    }

    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    var response: Response {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = Self.contentSecurityPolicy
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
