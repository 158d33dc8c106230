-- A job type's retention set by an operator (over the API, the CLI or SQL),
-- beside the one its definition gives. The drains write the definitions'
-- retentions (skiplock.define_job_types) and leave a type an operator has
-- set alone, so an operator's choice holds across deploys until it is
-- handed back to the definition (skiplock.set_job_type_retention with
-- by_operator false).
ALTER TABLE skiplock.job_types ADD COLUMN set_by text NOT NULL DEFAULT 'definition'
  CONSTRAINT job_types_set_by_definition_or_operator CHECK (set_by IN ('definition', 'operator'));

CREATE OR REPLACE FUNCTION skiplock.define_job_types(types text[], retentions integer[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO skiplock.job_types AS t (type, retention_seconds)
  SELECT d.type, d.retention FROM unnest(types, retentions) AS d(type, retention)
  WHERE d.retention IS NOT NULL OR EXISTS (SELECT 1 FROM skiplock.job_types e WHERE e.type = d.type)
  ON CONFLICT (type) DO UPDATE SET retention_seconds = excluded.retention_seconds, updated_at = now()
  WHERE t.set_by = 'definition' AND t.retention_seconds IS DISTINCT FROM excluded.retention_seconds;
$$;

-- An operator's retention for a type (0: none; null: the queue's or the
-- default), or, with by_operator false, the type handed back to its
-- definition: its retention is cleared until the next drain that defines
-- the type writes the definition's. Returns the type's row as it is now.
CREATE FUNCTION skiplock.set_job_type_retention(job_type text, retention integer, by_operator boolean)
RETURNS skiplock.job_types
LANGUAGE sql AS $$
  INSERT INTO skiplock.job_types AS t (type, retention_seconds, set_by)
  VALUES (job_type, CASE WHEN by_operator THEN retention END,
          CASE WHEN by_operator THEN 'operator' ELSE 'definition' END)
  ON CONFLICT (type) DO UPDATE SET retention_seconds = excluded.retention_seconds, set_by = excluded.set_by,
                                   updated_at = now()
  RETURNING t.*;
$$;
