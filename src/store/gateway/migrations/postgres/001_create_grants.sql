-- Per-run credentials of the model gateway and egress proxy on PostgreSQL (store/gateway/postgres-grant-store.ts),
-- the SQLite file's records (../001_create_grants.sql) plus the node they belong to: a node's gateway admits
-- only its own containers, and a node's start revokes the grants of runs it no longer follows, so every query
-- names its node and one node never reads or removes another's. Only the token's SHA-256 is kept, never the
-- token. holder: the grant's GrantHolder as JSON once bound (JSON.stringify's text, which escapes any NUL; never
-- interpreted here); NULL while only issued. Identifiers compare byte-wise (COLLATE "C").
CREATE TABLE grants (
  token_sha256 TEXT COLLATE "C" PRIMARY KEY,
  node         TEXT COLLATE "C" NOT NULL,
  run_id       TEXT COLLATE "C" NOT NULL,
  issued_at    BIGINT           NOT NULL,
  holder       TEXT,
  UNIQUE (node, run_id)
);
