-- The replayable event log (store/events/event-log.ts). AUTOINCREMENT: SQLite then never hands out an id
-- again, not even that of a deleted last row, so an id a client holds always means the same event.
CREATE TABLE events (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  stream TEXT    NOT NULL,
  type   TEXT    NOT NULL,
  data   TEXT    NOT NULL,
  at_ms  INTEGER NOT NULL
);
CREATE INDEX events_stream_id ON events (stream, id);
CREATE INDEX events_at ON events (at_ms);

-- Per stream, the highest id pruned: a client asking for events after a lower id is told that some are lost.
CREATE TABLE event_streams_pruned (
  stream  TEXT    PRIMARY KEY NOT NULL,
  through INTEGER NOT NULL
);
