-- Jobs dispatched through the database (issue 26): an accepted job is a pending row any node may claim.
--   accepted_by: the node that accepted the job (POST /run/async). `node` (002) is now the node the job is
--     with: its accepting node while it waits unclaimed, its claiming node from the claim on (whose Podman
--     runs it: where a request about it is forwarded).
--   claimed_by / claimed_at: the node that took the job from the queue and when (the database's clock). A
--     pending job with claimed_by set is claimed and not started: nothing of it has run (a job's container
--     is created only after its move to running, a compare-and-set on this row). A running job's claimed_by
--     is the node whose Podman runs it.
--   queued_at: when the job became claimable (the database's clock), the start of its dispatch latency.
--   pinned: only the accepting node (`accepted_by`) may claim it (a job that needs that node's disk: a session or
--     workspace kept there, or one another node could not accept again).
--   finished_by: the node that moved the job to its final status and owes its webhook (a node taking over a
--     lost node's owed deliveries changes it, by compare-and-set, so each webhook has one sender).
ALTER TABLE jobs ADD COLUMN accepted_by TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN claimed_by TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN claimed_at TIMESTAMPTZ;
ALTER TABLE jobs ADD COLUMN queued_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
ALTER TABLE jobs ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN finished_by TEXT COLLATE "C";

-- Jobs recorded before dispatch ran on the node that accepted them.
UPDATE jobs SET accepted_by = node;
UPDATE jobs SET claimed_by = node, claimed_at = created_at, pinned = true WHERE status IN ('pending', 'running');
UPDATE jobs SET finished_by = node WHERE webhook_state = 'pending';

CREATE INDEX jobs_claimable ON jobs (seq) WHERE status = 'pending' AND claimed_by IS NULL;
CREATE INDEX jobs_claimed_by_status ON jobs (claimed_by, status) WHERE claimed_by IS NOT NULL;
CREATE INDEX jobs_finished_by_webhook ON jobs (finished_by, seq) WHERE webhook_state = 'pending';

-- One channel, berth_jobs, wakes the nodes (each holds one LISTEN connection): 'pending' when a job becomes
-- claimable (inserted, or handed back), 'changed <claimed_by> <accepted_by>' when a claimed or held job changes hands
-- or status (its claimer aborts a job cancelled or lost elsewhere; its acceptor lets go of what it held for
-- it). A NOTIFY is sent at commit, and identical ones of one transaction are sent once.
CREATE FUNCTION berth_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'pending' AND NEW.claimed_by IS NULL THEN
    PERFORM pg_notify('berth_jobs', 'pending');
  END IF;
  IF TG_OP = 'UPDATE' AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.claimed_by IS DISTINCT FROM NEW.claimed_by) THEN
    PERFORM pg_notify('berth_jobs', 'changed ' || coalesce(OLD.claimed_by, '') || ' ' || coalesce(OLD.accepted_by, ''));
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify AFTER INSERT OR UPDATE OF status, claimed_by ON jobs
  FOR EACH ROW EXECUTE FUNCTION berth_jobs_notify();
