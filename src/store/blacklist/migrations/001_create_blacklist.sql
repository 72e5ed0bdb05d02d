-- Logged-out token ids, each kept until the token's own expiry (epoch milliseconds).
CREATE TABLE token_blacklist (
  jti           TEXT    PRIMARY KEY NOT NULL,
  expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX token_blacklist_expires_at_ms ON token_blacklist (expires_at_ms);
