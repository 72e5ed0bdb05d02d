-- The replayable event log (store/events/event-log.ts) on PostgreSQL (store/events/postgres-event-log.ts), as in
-- the SQLite file (../001_create_events.sql). An identity column's sequence never hands out a number twice, not
-- even that of a deleted last row, so an id a client holds always means the same event. `data` is json, not
-- jsonb: jsonb refuses the \u0000 escape an engine's output line may carry, and json keeps the text as written.
CREATE TABLE events (
  id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  stream TEXT   COLLATE "C" NOT NULL,
  type   TEXT   NOT NULL,
  data   JSON   NOT NULL,
  at_ms  BIGINT NOT NULL
);
CREATE INDEX events_stream_id ON events (stream, id);
CREATE INDEX events_at ON events (at_ms);

-- Per stream, the highest id pruned: a client asking for events after a lower id is told that some are lost.
CREATE TABLE event_streams_pruned (
  stream  TEXT   COLLATE "C" PRIMARY KEY,
  through BIGINT NOT NULL
);
