-- Logged-out token ids on PostgreSQL (store/blacklist/postgres-blacklist.ts), each kept until the token's own
-- expiry (epoch milliseconds), as in the SQLite file (../001_create_blacklist.sql).
CREATE TABLE token_blacklist (
  jti           TEXT   COLLATE "C" PRIMARY KEY,
  expires_at_ms BIGINT NOT NULL
);

CREATE INDEX token_blacklist_expires_at_ms ON token_blacklist (expires_at_ms);
