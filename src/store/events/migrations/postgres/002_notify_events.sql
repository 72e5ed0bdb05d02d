-- Every appended event is announced on the channel berth_events at its commit (issue 26), so that a node whose
-- follower waits for a stream another node writes (a job accepted here and run there) reads it from the log
-- at once (store/events/postgres-event-notices.ts). The payload is '<stream>:<id>' and never the event's
-- data: a notification is at most 8000 bytes and every node receives it.
CREATE FUNCTION berth_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('berth_events', NEW.stream || ':' || NEW.id);
  RETURN NULL;
END;
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION berth_events_notify();
