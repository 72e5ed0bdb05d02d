-- Per-run credentials of the model gateway and egress proxy (docs/egress.md): only the token's SHA-256 is
-- kept, never the token. holder: the grant's GrantHolder as JSON once bound; NULL while only issued.
CREATE TABLE grants (
  token_sha256 TEXT PRIMARY KEY NOT NULL,
  run_id       TEXT NOT NULL UNIQUE,
  issued_at    INTEGER NOT NULL,
  holder       TEXT
);
