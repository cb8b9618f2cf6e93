/// The OpenAPI 3.1 description of protocol v1, as the server serves it at `GET /openapi.json`.
///
/// Kept in this package so that clients in any language can generate code from the same text the server
/// serves; tests check that it is valid OpenAPI 3.1, that its paths are exactly the server's routes, and
/// that its error codes and limits are those of `ErrorCode` and `ProtocolLimits.standard`.
public enum OpenAPIDocument {
    /// The paths the document describes, with their methods, as `"METHOD /path"`.
    public static let operations: [String] = [
        "POST /v1/push", "GET /v1/pull", "POST /v1/sync", "GET /v1/live", "GET /v1/checksum", "POST /v1/uploads",
        "GET /v1/uploads/{id}", "PUT /v1/uploads/{id}/chunks/{index}", "POST /v1/uploads/{id}/commit",
        "HEAD /v1/blobs/{hash}", "GET /v1/blobs/{hash}", "GET /healthz", "GET /readyz", "GET /metrics",
        "GET /openapi.json", "GET /v1/admin/status", "GET /v1/admin/scopes", "GET /v1/admin/scopes/{scope}/replicas",
        "GET /dashboard", "GET /dashboard/dashboard.js", "GET /dashboard/dashboard.css",
    ]

    /// The methods a path is served with (from `operations`), or nil for a path the API does not have: a
    /// request to a known path with another method is answered 405 with these in `Allow`. A path parameter
    /// (`{id}`) matches any one non-empty segment.
    /// Every request asks (the server's `ErrorMiddleware`), so the templates are split once, not per request.
    public static func allowedMethods(path: String) -> [String]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var methods: [String] = []
        for operation in parsedOperations where operation.segments.count == segments.count {
            let matches = zip(operation.segments, segments).allSatisfy { expected, actual in
                expected == nil ? !actual.isEmpty : expected! == actual
            }
            if matches { methods.append(operation.method) }
        }
        return methods.isEmpty ? nil : methods
    }

    /// `operations` split into their method and path segments, a parameter (`{id}`) as nil.
    private static let parsedOperations: [(method: String, segments: [Substring?])] = operations.map { operation in
        let parts = operation.split(separator: " ", maxSplits: 1)
        let segments = parts[1].split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.first == "{" && segment.last == "}" ? nil : segment
        }
        return (String(parts[0]), segments)
    }

    /// The document as JSON text.
    public static let json: String = #"""
        {
          "openapi": "3.1.0",
          "info": {
            "title": "offline-sync protocol",
            "version": "1.0.0",
            "description": "Sync protocol v1. JSON bodies in UTF-8. A request body may be sent gzip-compressed with the header Content-Encoding: gzip (the body must then be a gzip stream: anything else is 400 request.malformed; an encoding other than gzip or identity is 415 request.unsupportedEncoding); responses larger than 1 KiB are gzip when the request sends Accept-Encoding: gzip. Limits (defaults, configurable per server): 8 MiB gzip body on the wire, 64 MiB after decompression (also the most for an identity body), 5000 events per push, 256 KiB per event payload; past a limit the answer is 413 request.tooLarge. Every error is a 4xx or 5xx with an Error body; bad input never gets a 500; a known path asked with a method it does not serve is 405 route.methodNotAllowed with an Allow header. Every response, errors included, carries X-Request-Id, the id the server's logs use for the request: the request's own X-Request-Id when it sent one of 1 to 128 printable ASCII characters without spaces, else one the server made (an addition). Ordering: each scope has a gap-free sequence seq equal to commit order. Stream versions: an event whose type the served domain does not declare commutative (CRDT operations are) asks for an optimistic-concurrency check, and is rejected with conflict.version when its stream already holds an event with a streamVersion at least as high; the result carries the stream's currentVersion. Domain rules: the served domain may refuse events it cannot accept (for example a quota no device can check alone) with validation.failed and a message for the user. Blobs (an addition): an attachment's bytes are uploaded in chunks through an upload session and read by their SHA-256 in a scope; events refer to blobs and are rejected with blob.missing while their scope does not hold them. docs/PROTOCOL.md in the repository is the full contract."
          },
          "servers": [{"url": "/"}],
          "security": [{"bearer": []}],
          "paths": {
            "/v1/push": {
              "post": {
                "operationId": "push",
                "summary": "Append events; one result per event, in request order.",
                "requestBody": {
                  "required": true,
                  "description": "A PushRequest as JSON; may be a gzip stream of it with Content-Encoding: gzip.",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PushRequest"}}}
                },
                "responses": {
                  "200": {
                    "description": "Each event accepted (with seq), duplicate (with its original seq) or rejected (with a code).",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PushResponse"}}}
                  },
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "410": {"$ref": "#/components/responses/ResetRequired"},
                  "413": {"$ref": "#/components/responses/TooLarge"},
                  "415": {"$ref": "#/components/responses/UnsupportedEncoding"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/pull": {
              "get": {
                "operationId": "pull",
                "summary": "Read events after a cursor, ordered by (scope, seq); optionally long-poll.",
                "parameters": [
                  {"name": "cursor", "in": "query", "required": false, "description": "Opaque cursor from an earlier answer; absent or empty is the beginning. A cursor the server did not issue is 400 request.invalid.", "schema": {"$ref": "#/components/schemas/Cursor"}},
                  {"name": "scopes", "in": "query", "required": false, "description": "Comma-separated scope names (each 1-128 characters of A-Z a-z 0-9 . _ : -), none twice (the pattern's lookahead: a repeated name is 400 request.invalid); absent or empty is every scope in the token. A scope not in the token is 403 scope.forbidden.", "schema": {"type": "string", "pattern": "^(?!(?:[^,]*,)*([^,]+),(?:[^,]*,)*\\1(?:,|$))(?:[A-Za-z0-9._:-]{1,128}(?:,[A-Za-z0-9._:-]{1,128})*)?$"}},
                  {"name": "limit", "in": "query", "required": false, "description": "Events per page.", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}},
                  {"name": "wait", "in": "query", "required": false, "description": "Seconds to long-poll when nothing is new; the answer comes as soon as an event arrives in one of the scopes.", "schema": {"type": "integer", "minimum": 0, "maximum": 30, "default": 0}},
                  {"name": "replica", "in": "query", "required": false, "description": "The pulling replica's id (an addition to PROTOCOL.md): the server records the cursor as what this replica has acknowledged, for compaction.", "schema": {"$ref": "#/components/schemas/ReplicaID"}},
                  {"name": "acknowledged", "in": "query", "required": false, "description": "With replica: a cursor no further than cursor, what the replica knew when it made the oldest event still in its outbox; the server records the lower of the two (an addition). A cursor the server did not issue is 400 request.invalid.", "schema": {"$ref": "#/components/schemas/Cursor"}},
                  {"name": "exclude", "in": "query", "required": false, "description": "A replica id: leave out the events it made, except folded history (an addition). The cursor still moves past them, and a long-poll is not answered for them alone.", "schema": {"$ref": "#/components/schemas/ReplicaID"}},
                  {"name": "markEvery", "in": "query", "required": false, "description": "Also answer the cursor after every markEvery events of the page (marks), so a replica can apply a long page in several transactions (an addition).", "schema": {"type": "integer", "minimum": 1, "maximum": 5000}}
                ],
                "responses": {
                  "200": {
                    "description": "A page of events, the cursor to send next, and whether more are waiting.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PullResponse"}}}
                  },
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "410": {"$ref": "#/components/responses/ResetRequired"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/sync": {
              "post": {
                "operationId": "sync",
                "summary": "Push, then pull, in one round trip.",
                "requestBody": {
                  "required": true,
                  "description": "A SyncRequest as JSON; may be a gzip stream of it with Content-Encoding: gzip.",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SyncRequest"}}}
                },
                "responses": {
                  "200": {
                    "description": "The push results and a page of events.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SyncResponse"}}}
                  },
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "410": {"$ref": "#/components/responses/ResetRequired"},
                  "413": {"$ref": "#/components/responses/TooLarge"},
                  "415": {"$ref": "#/components/responses/UnsupportedEncoding"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/live": {
              "get": {
                "operationId": "live",
                "summary": "The live stream (an addition): every commit of the scopes after the cursor, as it happens, as Server-Sent Events.",
                "description": "A long-lived text/event-stream answer, never compressed. Messages: event live (data LiveSubscribed) first; event events (data LiveFrame) for each commit or group of commits of one scope, the same bytes for every subscriber; comment lines (:) as heartbeats every heartbeatSeconds; event behind (data {}) when the server drops the subscriber back to catch-up (it pulls from its cursor, then subscribes again), then the stream ends; event error (data Error) with auth.expired when the token expires, then the stream ends. A frame continues a subscriber's position p in its scope when p equals its after; p at or past its head means it is already known; p below its after means events were missed (pull, then subscribe again). docs/PROTOCOL.md describes it in full.",
                "parameters": [
                  {"name": "cursor", "in": "query", "required": false, "description": "The subscriber's cursor (as for pull): frames follow each scope's position in it. A position more than 1,000 events behind is answered with behind at once.", "schema": {"$ref": "#/components/schemas/Cursor"}},
                  {"name": "scopes", "in": "query", "required": false, "description": "Comma-separated scope names, none twice, as for pull; absent or empty is every scope in the token.", "schema": {"type": "string", "pattern": "^(?!(?:[^,]*,)*([^,]+),(?:[^,]*,)*\\1(?:,|$))(?:[A-Za-z0-9._:-]{1,128}(?:,[A-Za-z0-9._:-]{1,128})*)?$"}},
                  {"name": "replica", "in": "query", "required": false, "description": "The subscribing replica's id (for logs; the stream records no progress).", "schema": {"$ref": "#/components/schemas/ReplicaID"}}
                ],
                "responses": {
                  "200": {
                    "description": "The stream (Server-Sent Events).",
                    "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/LiveMessage"}}}
                  },
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/checksum": {
              "get": {
                "operationId": "checksum",
                "summary": "The checksum of a scope's events up to a position, or in a range (an addition).",
                "description": "The sum of the 32-bit checksums of the scope's events in (after, through], each computed from the event's id, stream, type, schemaVersion, hlc, dot and canonical payload bytes (docs/PROTOCOL.md, Checksums); a folded row carries the sum of the events it replaced (carries). Without after: the whole prefix up to through, which a device compares with the sum it kept. With after: a range, which a device bisects with to find rows it lost or damaged. A range starting below the scope's compactedThrough, or a scope holding events stored before the server kept checksums, is 409 checksum.unavailable.",
                "parameters": [
                  {"name": "scope", "in": "query", "required": true, "description": "The scope; it must be in the token.", "schema": {"$ref": "#/components/schemas/Scope"}},
                  {"name": "through", "in": "query", "required": true, "description": "The position the sum ends at (inclusive). It must be at most the scope's head (the head of an earlier answer, or of a checksum with through 0): past the head is 400 request.invalid.", "schema": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807}},
                  {"name": "after", "in": "query", "required": false, "description": "The position the range starts after; absent for the whole prefix. It must be at most through: an after above through is 400 request.invalid (a rule between two parameters, which a schema cannot state).", "schema": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807}}
                ],
                "responses": {
                  "200": {
                    "description": "The checksum.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ChecksumResponse"}}}
                  },
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "409": {"$ref": "#/components/responses/ChecksumUnavailable"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/uploads": {
              "post": {
                "operationId": "openUpload",
                "summary": "Ask for an upload session of one blob in one scope (an addition; docs/PROTOCOL.md, Blobs).",
                "description": "Answers the scope's blob at once (committed true, no upload id) when the scope holds it already; otherwise the open session of the same scope and hash, if any (asking again resumes it), else a new one. A session expires at expiresAt with its chunks. The scope's committed blobs, its other open sessions and this size together may not pass the server's per-scope quota (413 blob.quotaExceeded, nothing created); a size past the server's largest blob is 413 request.tooLarge.",
                "requestBody": {
                  "required": true,
                  "description": "An UploadRequest as JSON; may be a gzip stream of it with Content-Encoding: gzip.",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadRequest"}}}
                },
                "responses": {
                  "200": {"description": "The session, or the committed blob.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadState"}}}},
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "413": {"$ref": "#/components/responses/BlobTooLarge"},
                  "415": {"$ref": "#/components/responses/UnsupportedEncoding"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/uploads/{id}": {
              "parameters": [
                {"name": "id", "in": "path", "required": true, "description": "The session's id (UploadState.upload); any other is 404 upload.notFound.", "schema": {"type": "string", "format": "uuid"}}
              ],
              "get": {
                "operationId": "uploadState",
                "summary": "The state of an upload session: the chunks still missing (to resume).",
                "responses": {
                  "200": {"description": "The session.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadState"}}}},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "404": {"$ref": "#/components/responses/UploadNotFound"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/uploads/{id}/chunks/{index}": {
              "parameters": [
                {"name": "id", "in": "path", "required": true, "description": "The session's id (UploadState.upload); any other is 404 upload.notFound.", "schema": {"type": "string", "format": "uuid"}},
                {"name": "index", "in": "path", "required": true, "description": "The chunk's index, 0 to chunks - 1.", "schema": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807}}
              ],
              "put": {
                "operationId": "uploadChunk",
                "summary": "Send one chunk of an upload session, in any order; sending it again changes nothing.",
                "parameters": [
                  {"name": "X-Chunk-SHA256", "in": "header", "required": true, "description": "The SHA-256 of the body's bytes as 64 hex digits; missing or malformed: 400 request.invalid, before the session or the body is looked at.", "schema": {"$ref": "#/components/schemas/BlobHash"}}
                ],
                "description": "The body is the chunk's bytes as they are (no Content-Encoding): chunkSize bytes, the last chunk of a blob shorter (size - index * chunkSize). The header X-Chunk-SHA256 carries the SHA-256 of those bytes as 64 hex digits (required: 400 request.invalid without it). A chunk longer than its place is 413 request.tooLarge, read no further; shorter, or an index outside the blob, 400 blob.chunkInvalid; bytes that do not match X-Chunk-SHA256, 400 blob.hashMismatch. A refused chunk is not stored.",
                "requestBody": {
                  "required": true,
                  "description": "The chunk's bytes.",
                  "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
                },
                "responses": {
                  "200": {"description": "The session after the chunk.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadState"}}}},
                  "400": {"$ref": "#/components/responses/ChunkRefused"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "404": {"$ref": "#/components/responses/UploadNotFound"},
                  "413": {"$ref": "#/components/responses/TooLarge"},
                  "415": {"$ref": "#/components/responses/UnsupportedEncoding"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/uploads/{id}/commit": {
              "parameters": [
                {"name": "id", "in": "path", "required": true, "description": "The session's id (UploadState.upload); any other is 404 upload.notFound.", "schema": {"type": "string", "format": "uuid"}}
              ],
              "post": {
                "operationId": "commitUpload",
                "summary": "Check the whole blob's SHA-256 and make it readable in the scope.",
                "description": "While chunks are missing: 409 upload.incomplete. Bytes that do not match the blob's hash: 400 blob.hashMismatch, and the session is deleted with its chunks. A commit again answers committed until the session expires.",
                "responses": {
                  "200": {"description": "The session, committed.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadState"}}}},
                  "400": {"$ref": "#/components/responses/HashMismatch"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "404": {"$ref": "#/components/responses/UploadNotFound"},
                  "409": {"$ref": "#/components/responses/UploadIncomplete"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/blobs/{hash}": {
              "parameters": [
                {"name": "hash", "in": "path", "required": true, "description": "The blob's SHA-256.", "schema": {"$ref": "#/components/schemas/BlobHash"}},
                {"name": "scope", "in": "query", "required": true, "description": "The scope holding the blob; the token must name it.", "schema": {"$ref": "#/components/schemas/Scope"}}
              ],
              "head": {
                "operationId": "blobHead",
                "summary": "Whether the scope holds the blob, and its length and type.",
                "responses": {
                  "200": {"description": "The scope holds it: Content-Length is the blob's size, Content-Type its type.", "headers": {"ETag": {"description": "The blob's hash in quotes.", "schema": {"type": "string"}}, "Accept-Ranges": {"schema": {"type": "string", "enum": ["bytes"]}}}},
                  "206": {"description": "A Range header of one bytes range: the headers a GET of that range would have (Content-Range), no body."},
                  "304": {"description": "Not modified: If-None-Match named the blob's ETag."},
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "404": {"$ref": "#/components/responses/BlobNotFound"},
                  "416": {"$ref": "#/components/responses/RangeNotSatisfiable"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              },
              "get": {
                "operationId": "blob",
                "summary": "The blob's bytes, or one range of them.",
                "description": "Content-Type is the blob's type; never compressed. A blob never changes: ETag is its hash in quotes, and Cache-Control says private, max-age=31536000, immutable. If-None-Match naming the ETag (or *) is answered 304. A Range header of one bytes range is answered 206 with Content-Range; a range starting at or past the end is 416 blob.rangeNotSatisfiable with Content-Range: bytes */size; other Range headers are ignored (200, the whole blob).",
                "responses": {
                  "200": {"description": "The whole blob.", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
                  "206": {"description": "The range asked for, with Content-Range.", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
                  "304": {"description": "Not modified: If-None-Match named the blob's ETag."},
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/Unauthorized"},
                  "403": {"$ref": "#/components/responses/Forbidden"},
                  "404": {"$ref": "#/components/responses/BlobNotFound"},
                  "416": {"$ref": "#/components/responses/RangeNotSatisfiable"},
                  "429": {"$ref": "#/components/responses/RateLimited"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/healthz": {
              "get": {
                "operationId": "healthz",
                "summary": "The process is alive.",
                "security": [],
                "responses": {"200": {"description": "Alive.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}
              }
            },
            "/readyz": {
              "get": {
                "operationId": "readyz",
                "summary": "The database is reachable and the migrations are applied.",
                "security": [],
                "responses": {
                  "200": {"description": "Ready.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/metrics": {
              "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics in the text exposition format.",
                "security": [],
                "responses": {"200": {"description": "Metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}}}
              }
            },
            "/openapi.json": {
              "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1 document.", "content": {"application/json": {"schema": {"type": "object"}}}}}
              }
            },
            "/v1/admin/status": {
              "get": {
                "operationId": "adminStatus",
                "summary": "The server now (an addition, admin API): uptime, version, memory, requests by route, push and pull latency over the last minute, errors by code, the database pool, connected devices, and one entry per second over the last five minutes.",
                "security": [{"admin": []}, {"adminBasic": []}],
                "responses": {
                  "200": {"description": "The status.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AdminStatus"}}}},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"}
                }
              }
            },
            "/v1/admin/scopes": {
              "get": {
                "operationId": "adminScopes",
                "summary": "Scopes, sorted, searched and paged on the server (an addition, admin API).",
                "security": [{"admin": []}, {"adminBasic": []}],
                "parameters": [
                  {"name": "search", "in": "query", "description": "Only scopes whose name contains this text, ignoring case.", "schema": {"type": "string"}},
                  {"name": "sort", "in": "query", "schema": {"type": "string", "enum": ["scope", "head", "lag", "replicas", "compactedAt"], "default": "scope"}},
                  {"name": "order", "in": "query", "schema": {"type": "string", "enum": ["asc", "desc"], "default": "asc"}},
                  {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}},
                  {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}}
                ],
                "responses": {
                  "200": {"description": "A page of scopes.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AdminScopes"}}}},
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/v1/admin/scopes/{scope}/replicas": {
              "parameters": [
                {"name": "scope", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}}
              ],
              "get": {
                "operationId": "adminReplicas",
                "summary": "The replicas seen in a scope, lowest acknowledged position first (an addition, admin API).",
                "security": [{"admin": []}, {"adminBasic": []}],
                "parameters": [
                  {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
                  {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}}
                ],
                "responses": {
                  "200": {"description": "A page of the scope's replicas.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AdminReplicas"}}}},
                  "400": {"$ref": "#/components/responses/BadRequest"},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"},
                  "503": {"$ref": "#/components/responses/Unavailable"}
                }
              }
            },
            "/dashboard": {
              "get": {
                "operationId": "dashboard",
                "summary": "The dashboard page (an addition): HTML that reads the admin API once a second; its script and style sheet are below. Nothing is loaded from another origin.",
                "security": [{"admin": []}, {"adminBasic": []}],
                "responses": {
                  "200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"}
                }
              }
            },
            "/dashboard/dashboard.js": {
              "get": {
                "operationId": "dashboardScript",
                "summary": "The dashboard's script.",
                "security": [{"admin": []}, {"adminBasic": []}],
                "responses": {
                  "200": {"description": "JavaScript.", "content": {"text/javascript": {"schema": {"type": "string"}}}},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"}
                }
              }
            },
            "/dashboard/dashboard.css": {
              "get": {
                "operationId": "dashboardStyles",
                "summary": "The dashboard's style sheet.",
                "security": [{"admin": []}, {"adminBasic": []}],
                "responses": {
                  "200": {"description": "CSS.", "content": {"text/css": {"schema": {"type": "string"}}}},
                  "401": {"$ref": "#/components/responses/AdminUnauthorized"},
                  "403": {"$ref": "#/components/responses/AdminRequired"},
                  "404": {"$ref": "#/components/responses/AdminOff"}
                }
              }
            }
          },
          "components": {
            "securitySchemes": {
              "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "HS256 JWT with claims sub (user), scopes (array of scope names the bearer may read and write) and exp."},
              "admin": {"type": "http", "scheme": "bearer", "description": "The admin token the server is configured with (SYNC_ADMIN_TOKEN): not a JWT, grants no scope. A device's token is refused with 403 auth.adminRequired."},
              "adminBasic": {"type": "http", "scheme": "basic", "description": "The admin token as the password of HTTP Basic authentication (any user name), as a browser sends it after the 401's challenge."}
            },
            "responses": {
              "BadRequest": {"description": "request.malformed (not JSON, or a bad gzip stream) or request.invalid (wrong types, missing fields, bad ids, bad query parameters).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "Unauthorized": {"description": "auth.missing, auth.invalid or auth.expired.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "Forbidden": {"description": "scope.forbidden: a requested scope is not in the token.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "ResetRequired": {"description": "reset.required: this replica is behind history compaction purged (its cursor, or on push its acknowledged position, is below the scope's retained history, and it has not pulled from position 0 since): drop what the server sent, pull from position 0, re-base pending events. Also for a cursor ahead of the scope's history.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "TooLarge": {"description": "request.tooLarge: a body, decompressed body, event count or payload past its limit.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "UnsupportedEncoding": {"description": "request.unsupportedEncoding: a Content-Encoding other than gzip or identity.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "BlobTooLarge": {"description": "request.tooLarge (a body past its limit, or a blob larger than the server's largest) or blob.quotaExceeded (the scope's blobs and uploads would pass its quota).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "ChunkRefused": {"description": "request.invalid (X-Chunk-SHA256 missing or not 64 hex digits), blob.chunkInvalid (an index outside the blob, a chunk shorter than its place) or blob.hashMismatch (the bytes do not match X-Chunk-SHA256).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "HashMismatch": {"description": "blob.hashMismatch: the uploaded bytes do not match the blob's hash; the session is deleted.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "UploadNotFound": {"description": "upload.notFound: no open session of that id in a scope of the token (never asked for, expired, or of another scope).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "UploadIncomplete": {"description": "upload.incomplete: chunks are still missing (GET the session to see which).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "BlobNotFound": {"description": "blob.notFound: the scope holds no committed blob of that hash.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "RangeNotSatisfiable": {"description": "blob.rangeNotSatisfiable: the range starts at or past the end of the blob.", "headers": {"Content-Range": {"description": "bytes */size", "schema": {"type": "string"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "ChecksumUnavailable": {"description": "checksum.unavailable: the range reaches into folded history (below the scope's compactedThrough) or into events stored before the server kept checksums.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "RateLimited": {"description": "rate.limited: too many concurrent requests for this token; see Retry-After.", "headers": {"Retry-After": {"schema": {"type": "integer"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "AdminUnauthorized": {"description": "auth.missing or auth.invalid: no admin credential, or a wrong one.", "headers": {"WWW-Authenticate": {"description": "Basic realm=\"sync-server admin\", charset=\"UTF-8\"", "schema": {"type": "string"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "AdminRequired": {"description": "auth.adminRequired: a valid token that is not the admin credential (a device's).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "AdminOff": {"description": "route.notFound: the server has no admin token configured, so the admin API and the dashboard are off; or, for a scope's replicas, no such scope.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
              "Unavailable": {"description": "server.unavailable: the database is unreachable or saturated; retry after Retry-After (1 to 3 seconds, random, so refused clients spread out).", "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1, "maximum": 3}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            },
            "schemas": {
              "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {
                  "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                      "code": {"type": "string", "enum": ["auth.missing", "auth.invalid", "auth.expired", "scope.forbidden", "auth.adminRequired", "request.malformed", "request.invalid", "request.tooLarge", "request.unsupportedEncoding", "route.notFound", "route.methodNotAllowed", "reset.required", "rate.limited", "server.unavailable", "server.internal", "checksum.unavailable", "blob.notFound", "upload.notFound", "blob.chunkInvalid", "blob.hashMismatch", "upload.incomplete", "blob.rangeNotSatisfiable", "blob.quotaExceeded"]},
                      "message": {"type": "string"}
                    }
                  }
                }
              },
              "Health": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
              "Dot": {
                "type": "object",
                "required": ["replica", "counter"],
                "properties": {
                  "replica": {"$ref": "#/components/schemas/ReplicaID"},
                  "counter": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807}
                }
              },
              "ReplicaID": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"},
              "Scope": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
              "HLC": {"type": "string", "pattern": "^0000[0-9a-fA-F]{12}:[0-9a-fA-F]{4}:[0-9a-fA-F]{16}$", "description": "A hybrid logical clock, PPPPPPPPPPPPPPPP:CCCC:NNNNNNNNNNNNNNNN: 16 hex digits of Unix milliseconds (at most 0000ffffffffffff, 48 bits), 4 of logical counter and 16 of node, either case."},
              "Cursor": {
                "type": "string", "format": "sync-cursor", "maxLength": 65536, "pattern": "^[A-Za-z0-9_-]*$",
                "description": "An opaque cursor: empty (the beginning), or one the server issued in an answer (cursor or marks). Store it and send it back as it is: anything else is 400 request.invalid. Clients must not build or parse one; today it is the unpadded base64url encoding of a JSON object mapping scope names to the last seq read (format sync-cursor), at most 64 KiB of text."
              },
              "Event": {
                "type": "object",
                "description": "An event that keeps the envelope's rules (docs/PROTOCOL.md, Events): every event the server stores and serves. Push and sync requests carry PushedEvent: an event that parses but breaks one of these rules is answered rejected with event.invalid in the 200 of its push, not refused; so is one whose hlc node is not the first 16 hex digits of dot.replica, or whose stream or type is longer in UTF-8 bytes than its limit (which a schema, counting characters, cannot state).",
                "required": ["id", "scope", "stream", "streamVersion", "type", "schemaVersion", "hlc", "dot", "payload"],
                "properties": {
                  "id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$", "description": "A UUIDv7 (RFC 9562 variant) made by the client; the idempotency key."},
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "stream": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\u0000]*$", "description": "The aggregate the event belongs to: 1 to 256 UTF-8 bytes, no U+0000."},
                  "streamVersion": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807},
                  "type": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^\\u0000]*$", "description": "1 to 128 UTF-8 bytes, no U+0000."},
                  "schemaVersion": {"type": "integer", "minimum": 1, "maximum": 2147483647},
                  "hlc": {"$ref": "#/components/schemas/HLC"},
                  "dot": {"$ref": "#/components/schemas/Dot"},
                  "payload": {"description": "Any JSON value, at most 256 KiB encoded; no U+0000 in any string or key."}
                }
              },
              "PushedEvent": {
                "type": "object",
                "description": "An event as push and sync requests carry it: what the server reads. Anything else (a missing field, a wrong JSON type, an id, scope, hlc, dot.replica or receivedAt that does not parse, an integer out of range) is 400 request.invalid for the whole request, and nothing is stored. An event of this shape that breaks a rule of Event (a UUIDv7 id; stream and type of 1 to 256 and 1 to 128 UTF-8 bytes without U+0000; streamVersion, schemaVersion and dot.counter in range; the hlc node equal to the first 16 hex digits of dot.replica) is answered rejected with event.invalid in the 200, and the rest of the push goes on. Integers may be written with a zero fraction or an exponent (1.0, 1e0), as JSON Schema's integer has them.",
                "required": ["id", "scope", "stream", "streamVersion", "type", "schemaVersion", "hlc", "dot", "payload"],
                "properties": {
                  "id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "A UUID in its 36-character form, either case; it must be a UUIDv7 (else event.invalid)."},
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "stream": {"type": "string", "description": "1 to 256 UTF-8 bytes without U+0000, else event.invalid."},
                  "streamVersion": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "1 or more, else event.invalid."},
                  "type": {"type": "string", "description": "1 to 128 UTF-8 bytes without U+0000, else event.invalid."},
                  "schemaVersion": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "1 to 2147483647, else event.invalid."},
                  "hlc": {"$ref": "#/components/schemas/HLC"},
                  "dot": {
                    "type": "object",
                    "required": ["replica", "counter"],
                    "properties": {
                      "replica": {"$ref": "#/components/schemas/ReplicaID"},
                      "counter": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807, "description": "1 or more, else event.invalid."}
                    }
                  },
                  "payload": {"description": "Any JSON value. Past the payload limit (256 KiB by default, measured as the JSON the server stores) the whole request is 413 request.tooLarge; a U+0000 in a string or key is event.invalid."},
                  "seq": {"type": ["integer", "null"], "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "Written by the server; ignored in a push."},
                  "receivedAt": {"type": ["string", "null"], "pattern": "^(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$", "description": "Written by the server; ignored in a push, but read as an RFC 3339 time: YYYY-MM-DDTHH:MM:SS (a second of 60 at any minute), a fraction of any length, then Z or an offset ±HH:MM, T and Z in either case. Anything else is 400 request.invalid."},
                  "carries": {"type": ["integer", "null"], "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "Written by the server on folded rows; ignored in a push."}
                }
              },
              "StoredEvent": {
                "allOf": [
                  {"$ref": "#/components/schemas/Event"},
                  {
                    "type": "object",
                    "required": ["seq", "receivedAt"],
                    "properties": {
                      "seq": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807, "description": "Position in the scope: gap-free, in commit order."},
                      "receivedAt": {"type": "string", "format": "date-time"},
                      "carries": {"type": "integer", "minimum": 0, "description": "Only on a folded row (a snapshot compaction wrote): the sum of the checksums of the events it replaced, which it adds to its scope's checksum in their place (an addition)."}
                    }
                  }
                ]
              },
              "BlobHash": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "The SHA-256 of a blob's bytes as 64 hex digits (servers answer in lowercase)."},
              "UploadRequest": {
                "type": "object",
                "required": ["scope", "hash", "size", "type"],
                "properties": {
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "hash": {"$ref": "#/components/schemas/BlobHash"},
                  "size": {"type": "integer", "minimum": 0, "maximum": 4294967296, "description": "The blob's length in bytes, at most the server's largest blob (4 GiB by default): past it, 413 request.tooLarge."},
                  "type": {"type": "string", "minLength": 3, "maxLength": 127, "pattern": "^[!-.0-~]+/[!-.0-~]+$", "description": "A media type (type/subtype: visible ASCII with one slash, neither first nor last), application/octet-stream when unknown."}
                }
              },
              "UploadState": {
                "type": "object",
                "required": ["scope", "hash", "size", "type", "chunkSize", "chunks", "missing", "committed"],
                "properties": {
                  "upload": {"type": "string", "format": "uuid", "description": "The session's id; absent when the scope held the blob already."},
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "hash": {"$ref": "#/components/schemas/BlobHash"},
                  "size": {"type": "integer", "minimum": 0},
                  "type": {"type": "string"},
                  "chunkSize": {"type": "integer", "minimum": 1, "description": "The length of every chunk but the last."},
                  "chunks": {"type": "integer", "minimum": 0, "description": "How many chunks the blob is cut in (0 for an empty blob)."},
                  "missing": {"type": "array", "items": {"type": "integer", "minimum": 0}, "description": "The chunks the server does not hold yet, in order."},
                  "committed": {"type": "boolean", "description": "Whether the blob is readable in the scope."},
                  "expiresAt": {"type": "string", "format": "date-time", "description": "When an uncommitted session is forgotten with its chunks; absent once committed."}
                }
              },
              "ChecksumResponse": {
                "type": "object",
                "required": ["scope", "after", "through", "checksum", "head", "compactedThrough"],
                "properties": {
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "after": {"type": "integer", "description": "The range's start (exclusive); 0 for a whole prefix."},
                  "through": {"type": "integer", "description": "The range's end (inclusive)."},
                  "checksum": {"type": "integer", "description": "The sum of the checksums of the scope's events in (after, through]."},
                  "events": {"type": "integer", "description": "For a range: how many events it holds."},
                  "head": {"type": "integer", "description": "The scope's head when the answer was read."},
                  "compactedThrough": {"type": "integer", "description": "How far the server has folded the scope; a range must start at or above it."}
                }
              },
              "PushRequest": {
                "type": "object",
                "required": ["replica", "events"],
                "properties": {
                  "replica": {"$ref": "#/components/schemas/ReplicaID"},
                  "events": {"type": "array", "maxItems": 5000, "items": {"$ref": "#/components/schemas/PushedEvent"}}
                }
              },
              "Remaining": {
                "type": "integer", "minimum": 0,
                "description": "Events past cursor up to each requested scope's head when the page was read, summed over the scopes: the progress of a long pull. An upper bound once compaction has folded events. Added after v1's first publication: clients must accept its absence."
              },
              "StablePoints": {
                "type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                "description": "Each requested scope's stable point, by scope name: the highest seq every replica seen within the server's eviction horizon has acknowledged. History at or below it may be folded; a replica may prune its own copy. Added after v1's first publication: clients must accept its absence."
              },
              "OthersStablePoints": {
                "type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                "description": "Each requested scope's stable point among the other replicas, by scope name: as stable, leaving out the replica the request names. Only in answers to a request that names its replica. That replica may fold on arrival, instead of logging, the events at or below it of a stream it has nothing of its own pending in. Added after v1's first publication: clients must accept its absence."
              },
              "Marks": {
                "type": "array", "items": {"type": "string"},
                "description": "With markEvery in the request: the cursor after every markEvery events of the page, in order (the i-th where the page would have ended after its first (i + 1) * markEvery events), the page's end left out. Storing one and pulling from it later reads exactly the events after it. Added after v1's first publication: absent from older servers and when not asked for."
              },
              "Purged": {
                "type": "object", "additionalProperties": {"type": "integer"},
                "description": "Only in an answer to a read from position 0 in a scope whose compaction purged streams: for each such scope, by name, the sum of the checksums the purged streams carried, which the replica adds once to its own sum (docs/PROTOCOL.md, Checksums). Added after v1's first publication: absent from older servers and when there is none."
              },
              "PushResult": {
                "type": "object",
                "required": ["id", "status"],
                "properties": {
                  "id": {"type": "string", "format": "uuid"},
                  "status": {"type": "string", "enum": ["accepted", "duplicate", "rejected"]},
                  "seq": {"type": "integer", "minimum": 1, "description": "For accepted and duplicate: the event's seq (for a duplicate, the one it got the first time)."},
                  "code": {"type": "string", "enum": ["scope.forbidden", "validation.failed", "conflict.version", "event.invalid", "blob.missing"], "description": "blob.missing (an addition): the event refers to a blob its scope does not hold; upload the blob, then push the event again."},
                  "message": {"type": "string"},
                  "currentVersion": {"type": "integer", "description": "For conflict.version: the stream's highest stored streamVersion."}
                }
              },
              "PushResponse": {
                "type": "object",
                "required": ["results"],
                "properties": {"results": {"type": "array", "items": {"$ref": "#/components/schemas/PushResult"}}}
              },
              "PullResponse": {
                "type": "object",
                "required": ["events", "cursor", "hasMore"],
                "properties": {
                  "events": {"type": "array", "items": {"$ref": "#/components/schemas/StoredEvent"}},
                  "cursor": {"type": "string"},
                  "hasMore": {"type": "boolean"},
                  "remaining": {"$ref": "#/components/schemas/Remaining"},
                  "stable": {"$ref": "#/components/schemas/StablePoints"},
                  "othersStable": {"$ref": "#/components/schemas/OthersStablePoints"},
                  "marks": {"$ref": "#/components/schemas/Marks"},
                  "purged": {"$ref": "#/components/schemas/Purged"}
                }
              },
              "LiveFrame": {
                "type": "object",
                "description": "The data of an events message of the live stream: the events of one scope with seq after+1 through head, contiguous and in order.",
                "required": ["scope", "after", "head", "events"],
                "properties": {
                  "scope": {"$ref": "#/components/schemas/Scope"},
                  "after": {"type": "integer", "minimum": 0, "maximum": 9223372036854775807, "description": "The scope's position before the first event."},
                  "head": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807, "description": "The scope's position after the last event."},
                  "events": {"type": "array", "items": {"$ref": "#/components/schemas/StoredEvent"}}
                }
              },
              "LiveSubscribed": {
                "type": "object",
                "description": "The data of the live message that opens the stream.",
                "required": ["heartbeatSeconds"],
                "properties": {"heartbeatSeconds": {"type": "integer", "minimum": 1}}
              },
              "LiveMessage": {
                "description": "One message of the live stream, a Server-Sent Event: its event name, and its data, one line of JSON. The schema is of each event of the stream (the convention OpenAPI 3.2 names itemSchema); heartbeats are comment lines, not events. Events of other names may be added: clients ignore those they do not know.",
                "oneOf": [
                  {"type": "object", "required": ["event", "data"], "properties": {"event": {"const": "live"}, "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": {"$ref": "#/components/schemas/LiveSubscribed"}}}},
                  {"type": "object", "required": ["event", "data"], "properties": {"event": {"const": "events"}, "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": {"$ref": "#/components/schemas/LiveFrame"}}}},
                  {"type": "object", "required": ["event", "data"], "properties": {"event": {"const": "behind"}, "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": {"type": "object", "maxProperties": 0}}}},
                  {"type": "object", "required": ["event", "data"], "properties": {"event": {"const": "error"}, "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": {"$ref": "#/components/schemas/Error"}}}}
                ]
              },
              "SyncRequest": {
                "type": "object",
                "required": ["replica", "events"],
                "properties": {
                  "replica": {"$ref": "#/components/schemas/ReplicaID"},
                  "events": {"type": "array", "maxItems": 5000, "items": {"$ref": "#/components/schemas/PushedEvent"}},
                  "cursor": {"anyOf": [{"$ref": "#/components/schemas/Cursor"}, {"type": "null"}], "description": "As for pull; absent, null or empty is the beginning."},
                  "scopes": {"type": ["array", "null"], "uniqueItems": true, "items": {"$ref": "#/components/schemas/Scope"}, "description": "The scopes to pull, none twice; absent or null is every scope in the token. A scope not in the token is 403 scope.forbidden."},
                  "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 5000, "default": 500, "description": "Events per page; absent or null is the default."},
                  "acknowledged": {
                    "anyOf": [{"$ref": "#/components/schemas/Cursor"}, {"type": "null"}],
                    "description": "A cursor no further than cursor: what the replica knew when it made the oldest event still in its outbox. The server records the lower of the two, scope by scope, as the replica's acknowledged position (compaction's stable point). Absent or null: cursor. Added after v1's first publication."
                  },
                  "excludeOwn": {
                    "type": ["boolean", "null"],
                    "default": false,
                    "description": "True: leave the events this replica made out of the page, except folded history; the cursor still moves past them. For a replica that holds all its own events (not one pulling from the start after a reset). Added after v1's first publication."
                  },
                  "markEvery": {
                    "type": ["integer", "null"], "minimum": 1, "maximum": 5000,
                    "description": "Also answer the cursor after every markEvery events of the page (marks), so the replica can apply a long page in several transactions; absent or null asks for none. Added after v1's first publication."
                  }
                }
              },
              "SyncResponse": {
                "type": "object",
                "required": ["results", "events", "cursor", "hasMore"],
                "properties": {
                  "results": {"type": "array", "items": {"$ref": "#/components/schemas/PushResult"}},
                  "events": {"type": "array", "items": {"$ref": "#/components/schemas/StoredEvent"}},
                  "cursor": {"type": "string"},
                  "hasMore": {"type": "boolean"},
                  "remaining": {"$ref": "#/components/schemas/Remaining"},
                  "stable": {"$ref": "#/components/schemas/StablePoints"},
                  "othersStable": {"$ref": "#/components/schemas/OthersStablePoints"},
                  "marks": {"$ref": "#/components/schemas/Marks"},
                  "purged": {"$ref": "#/components/schemas/Purged"}
                }
              },
              "AdminPercentiles": {
                "type": "object",
                "required": ["count"],
                "properties": {
                  "count": {"type": "integer", "minimum": 0},
                  "p50Ms": {"type": "number", "minimum": 0},
                  "p90Ms": {"type": "number", "minimum": 0},
                  "p99Ms": {"type": "number", "minimum": 0}
                }
              },
              "AdminStatus": {
                "type": "object",
                "description": "Durations in milliseconds, within about 9 %. A field without a value (no request of its kind yet, no resident size on the platform) is left out.",
                "required": ["server", "requests", "latency", "errors", "events", "database", "connections", "series"],
                "properties": {
                  "server": {
                    "type": "object",
                    "required": ["version", "domain", "startedAt", "uptimeSeconds"],
                    "properties": {
                      "version": {"type": "string"},
                      "domain": {"type": "string"},
                      "startedAt": {"type": "string", "format": "date-time"},
                      "uptimeSeconds": {"type": "number", "minimum": 0},
                      "residentBytes": {"type": "integer", "minimum": 0}
                    }
                  },
                  "requests": {
                    "type": "object",
                    "required": ["total", "perSecond", "byRoute"],
                    "properties": {
                      "total": {"type": "integer", "minimum": 0},
                      "perSecond": {"type": "number", "minimum": 0, "description": "Over the last ten complete seconds."},
                      "byRoute": {
                        "type": "array",
                        "items": {
                          "type": "object",
                          "required": ["method", "route", "count", "errors"],
                          "properties": {
                            "method": {"type": "string"},
                            "route": {"type": "string", "description": "The route's pattern (/v1/uploads/{id}), or NotFound."},
                            "count": {"type": "integer", "minimum": 0},
                            "errors": {"type": "integer", "minimum": 0},
                            "p50Ms": {"type": "number", "minimum": 0},
                            "p99Ms": {"type": "number", "minimum": 0}
                          }
                        }
                      }
                    }
                  },
                  "latency": {
                    "type": "object",
                    "description": "Over the last minute: pushes, and pulls and syncs that did not ask to wait.",
                    "required": ["push", "pull"],
                    "properties": {"push": {"$ref": "#/components/schemas/AdminPercentiles"}, "pull": {"$ref": "#/components/schemas/AdminPercentiles"}}
                  },
                  "errors": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": ["code", "status", "count"],
                      "properties": {"code": {"type": "string"}, "status": {"type": "integer"}, "count": {"type": "integer", "minimum": 1}}
                    }
                  },
                  "events": {
                    "type": "object",
                    "required": ["accepted", "duplicate", "rejected", "pulled"],
                    "properties": {
                      "accepted": {"type": "integer", "minimum": 0},
                      "duplicate": {"type": "integer", "minimum": 0},
                      "rejected": {"type": "integer", "minimum": 0},
                      "pulled": {"type": "integer", "minimum": 0}
                    }
                  },
                  "database": {
                    "type": "object",
                    "required": ["poolSize", "inUse", "admitted", "queueLimit"],
                    "properties": {
                      "poolSize": {"type": "integer", "minimum": 1},
                      "inUse": {"type": "integer", "minimum": 0},
                      "admitted": {"type": "integer", "minimum": 0, "description": "Operations waiting for or holding a connection."},
                      "queueLimit": {"type": "integer", "minimum": 1}
                    }
                  },
                  "connections": {
                    "type": "object",
                    "required": ["liveStreams", "longPolls", "parkedLongPolls"],
                    "properties": {
                      "liveStreams": {"type": "integer", "minimum": 0},
                      "longPolls": {"type": "integer", "minimum": 0},
                      "parkedLongPolls": {"type": "integer", "minimum": 0}
                    }
                  },
                  "series": {
                    "type": "array",
                    "description": "One entry per second with a request, oldest first, over the last five minutes.",
                    "items": {
                      "type": "object",
                      "required": ["t", "requests", "errors", "eventsAccepted", "eventsPulled"],
                      "properties": {
                        "t": {"type": "integer", "description": "Unix seconds."},
                        "requests": {"type": "integer", "minimum": 0},
                        "errors": {"type": "integer", "minimum": 0},
                        "eventsAccepted": {"type": "integer", "minimum": 0},
                        "eventsPulled": {"type": "integer", "minimum": 0},
                        "pushP99Ms": {"type": "number", "minimum": 0},
                        "pullP99Ms": {"type": "number", "minimum": 0}
                      }
                    }
                  }
                }
              },
              "AdminScopes": {
                "type": "object",
                "required": ["total", "offset", "limit", "sort", "order", "scopes"],
                "properties": {
                  "total": {"type": "integer", "minimum": 0, "description": "Scopes that match the search."},
                  "offset": {"type": "integer", "minimum": 0},
                  "limit": {"type": "integer", "minimum": 1},
                  "sort": {"type": "string", "enum": ["scope", "head", "lag", "replicas", "compactedAt"]},
                  "order": {"type": "string", "enum": ["asc", "desc"]},
                  "scopes": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": ["scope", "head", "storedEvents", "bytes", "blobBytes", "retainedFrom", "compactedThrough", "compactionRemoved", "replicas", "eventsPerSecond"],
                      "properties": {
                        "scope": {"type": "string"},
                        "head": {"type": "integer", "minimum": 0, "description": "The events the scope accepted (its last seq)."},
                        "storedEvents": {"type": "integer", "minimum": 0, "description": "Rows stored: events not folded yet and folded streams (read at most every 10 s)."},
                        "bytes": {"type": "integer", "minimum": 0, "description": "Their payloads' bytes as stored."},
                        "blobBytes": {"type": "integer", "minimum": 0},
                        "stable": {"type": "integer", "minimum": 0, "description": "The lowest position the scope's active replicas acknowledged; absent without one."},
                        "stableLag": {"type": "integer", "minimum": 0},
                        "retainedFrom": {"type": "integer", "minimum": 1},
                        "compactedThrough": {"type": "integer", "minimum": 0},
                        "compactedAt": {"type": "string", "format": "date-time"},
                        "compactionRemoved": {"type": "integer", "minimum": 0},
                        "replicas": {"type": "integer", "minimum": 0, "description": "Replicas seen within the eviction horizon."},
                        "eventsPerSecond": {"type": "number", "minimum": 0, "description": "Since an earlier answer about the scope, at least a second before."}
                      }
                    }
                  }
                }
              },
              "AdminReplicas": {
                "type": "object",
                "required": ["scope", "head", "total", "offset", "limit", "replicas"],
                "properties": {
                  "scope": {"type": "string"},
                  "head": {"type": "integer", "minimum": 0},
                  "stable": {"type": "integer", "minimum": 0},
                  "total": {"type": "integer", "minimum": 0},
                  "offset": {"type": "integer", "minimum": 0},
                  "limit": {"type": "integer", "minimum": 1},
                  "replicas": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "required": ["replica", "acknowledged", "behind", "seenAt", "secondsSinceSeen", "active", "holdsStable"],
                      "properties": {
                        "replica": {"type": "string"},
                        "acknowledged": {"type": "integer", "minimum": 0},
                        "behind": {"type": "integer", "minimum": 0},
                        "seenAt": {"type": "string", "format": "date-time"},
                        "secondsSinceSeen": {"type": "number", "minimum": 0},
                        "active": {"type": "boolean", "description": "Seen within the eviction horizon."},
                        "holdsStable": {"type": "boolean", "description": "Its position is the scope's stable point, below the head."}
                      }
                    }
                  }
                }
              }
            }
          }
        }
        """#
}
