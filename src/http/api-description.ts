// The introduction of Berth's OpenAPI document (GET /swagger/doc.json), and so of docs/api.md: what every
// endpoint shares, and what Berth does where a client could reasonably expect something else. Markdown,
// without links: the document is read on its own, away from this repository.

export const API_DESCRIPTION = `Berth runs the Claude Code CLI (the engine) inside isolated Podman containers (each in a user namespace of its own, so container root is never host root): a caller sends
a prompt, Berth validates it against its sandbox rules, runs the engine in a fresh container, answers with the
output and a \`session_id\`, and removes the container.

**Requests.** Bodies are JSON, sent with \`Content-Type: application/json\` (file and archive uploads to a workspace are raw bytes). A body field of the wrong type, a
missing required field or an unknown field is a 400 naming the field; body values are never converted or
dropped. Query and path parameters arrive as text and are converted to the declared type (\`?limit=5\`). A
DELETE may carry an empty body.

**Authentication.** Every endpoint except GET /health, GET /version, POST /auth/token and POST /auth/refresh
needs \`Authorization: Bearer <access token>\`. An access token (24 h by default) and a refresh token (7 days)
come from POST /auth/token, which takes one of the server's API tokens (SERVICE_API_TOKENS) in the same header.
Tokens are HS256 JWTs carrying \`sub\` (the name of the API token that obtained them, \`token:<fingerprint>\` for
an unnamed one; never the requested client_id), \`client_id\` (a label), \`iat\`, \`exp\` and a token id. A server started with
SERVICE_AUTH_ENABLED=false checks no token. 401 answers carry \`token required\`, \`invalid token\`,
\`token expired\` or \`token blacklisted\`; when the token blacklist itself fails during the check, the answer
is 503 (the check fails closed).

**Errors.** Every error is \`{"error": "<message>", "status": "error"}\` with an HTTP status, for example
\`404 {"error": "session 3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55 not found", "status": "error"}\`. The messages
listed under each endpoint are the server's own texts, with placeholders in angle brackets.

**Ownership.** Every session, job, agent and workspace belongs to the caller (the token's \`sub\`, so the API token) that
created it. Another caller gets 404 for it and never sees it listed, whatever client_id it asked for. The same holds for
usage records: GET /usage counts only the caller's own model requests.

**Model usage and budgets.** Engines never hold the model credential: their model requests go through Berth's
model gateway, which records each one (tokens, estimated cost, per run and per caller; GET /usage) and enforces
the budgets before forwarding it: a run's \`engine.max_budget_usd\`, and the operator's per-caller limits per UTC
day (SERVICE_CALLER_BUDGET_USD_PER_DAY, SERVICE_CALLER_TOKENS_PER_DAY). A request in flight finishes and is
counted; the next one is refused, and the run ends with 429 \`model budget reached: <which limit, its value and
what was used>\`. Once a caller's daily limit is spent, new runs, jobs and agents are refused with that 429 before
any container starts, until 00:00 UTC.

**Identifiers.** Runs are \`run-…\`, jobs \`job-…\`, agents \`agent-…\`, turns \`turn-…\`; session ids are UUIDs. A
session id in a path that is not a UUID names no session: 404, like any unknown id (Berth never builds a file
path from it). A malformed \`engine.session_id\` in a run request is a 400.

**Rate limiting.** Requests are limited per client IP (token bucket: 10 per second, bursts of 20 by default;
SERVICE_RATE_LIMIT_ENABLED=false switches it off). Over the limit: 429 \`rate limit exceeded; slow down and
retry later\` and a \`Retry-After\` header; while limiting is on, every answer carries \`X-RateLimit-Remaining\`. Forwarding headers count only from the proxies
listed in SERVICE_RATE_LIMIT_TRUSTED_PROXIES.

**Several nodes.** With SERVICE_DATABASE_URL several Berths (nodes) share one PostgreSQL database, and any node
answers any request. A request for an agent (GET and DELETE /agents/{id}, its send and stream), or for the stream
or cancel of a job another node is running, is forwarded to the node that runs it as it came, Authorization
included, which that node checks again; its answer comes back as it is sent (SSE frame by frame). A forwarded
request carries \`X-Berth-Forwarded-From: <node>\` and is never forwarded again: a client that sends that header
only gets the receiving node's own answer (404 for an agent it does not run). A node that cannot be reached is
502 \`the request was forwarded to node <node>, which runs what it names, and failed there: <reason>; retry\`; an
agent of a node without a live lease is answered from its record once it has exited (a lost node's agents
become exited, \`node_lost\`) and is otherwise 503 naming the node. GET /agents lists the caller's agents on every
node, and the per-caller limits (SERVICE_MAX_CONTAINERS_PER_CALLER, SERVICE_COMPOSE_MAX_STACKS_PER_CALLER) count
the caller's containers and stacks on every node.

**What Berth chooses where clients may differ.**
- A run that fails answers with an error status (500 with the engine's reason, 404 for an unknown session,
  409 for a session in use); a run response's \`status\` is always \`completed\`.
- A session in use by another run is refused with 409, not queued.
- Jobs go \`pending\` → \`running\` → \`completed\`, \`failed\` or \`crashed\`; DELETE cancels a pending or running job
  (\`cancelled\`); cancelling a finished job is 409. A job left running by a server that was killed is
  followed again by the next start (its container kept running) and ends normally with its full output;
  one still pending is run; only one whose container is gone (or that can no longer be accepted) becomes
  \`crashed\` with \`crash_info.reason\` \`service_restart\`. Persistent agents are found again too.
- On SIGTERM, new runs, jobs, agents and turns are refused with 503 (\`BERTH_ERR_SHUTTING_DOWN\`) while work
  in flight is stopped, drained or detached (SERVICE_SHUTDOWN_MODE).
- On completion of a job with \`webhook_url\`, Berth POSTs \`{"event": "job.finished", "job_id", "status",
  "session_id", "output", "structured_output"?, "crash_info", "error"?, "created_at", "finished_at"}\`, signed
  with \`X-Service-Signature: sha256=<hex>\` (HMAC-SHA256 of \`<X-Service-Timestamp>.<body>\`) when
  SERVICE_WEBHOOK_SIGNING_SECRET is set, and retries 5xx answers and network failures 5 times (1 s, 2 s, 4 s,
  8 s, 16 s) with the same bytes and signature.
- \`limit\` on a messages page larger than SERVICE_SESSIONS_MAX_PAGE_SIZE is clamped to it; the page says so in
  \`limit\` and tells with \`has_more\` whether messages follow.
- A prompt over SERVICE_MAX_PROMPT_BYTES (1 MiB by default) is 413, like a body over SERVICE_MAX_BODY_BYTES
  (2 MiB).
- Compose environments (\`container.environment\`): a session's stack outlives the run (and a restart of
  Berth); it is removed with the session (\`DELETE /sessions/:id\`) or after SERVICE_COMPOSE_STACK_TTL unused.
  A service that does not become healthy in time fails the run with 500, naming it.
- An agent deleted while still \`starting\` is stopped like any other (204).`;
