-- Every job belongs to the caller that submitted it (the `sub` of its access token; '' with
-- authentication off and for jobs stored before owners existed). Other callers never see it.
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';

CREATE INDEX jobs_owner_seq ON jobs (owner, seq);
