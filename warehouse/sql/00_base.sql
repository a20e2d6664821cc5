-- Base views, one per table, over the raw_<table> views the catalog builds from the part
-- files. The hive partition column `date` stays in raw_<table> (use it to prune scans).

-- Every run that uses a problem logs it: keep the latest row per problem.
CREATE OR REPLACE VIEW problems AS
SELECT * EXCLUDE (date) FROM raw_problems
QUALIFY row_number() OVER (PARTITION BY problem_id ORDER BY recorded_at DESC) = 1;

CREATE OR REPLACE VIEW problem_features AS
SELECT * EXCLUDE (date) FROM raw_problem_features
QUALIFY row_number() OVER (PARTITION BY problem_id, feature ORDER BY recorded_at DESC) = 1;

-- The writer that went on with a resumed run last (see run_ends).
CREATE OR REPLACE VIEW run_resumes AS
SELECT run_id, steps AS from_step, ended_at AS resumed_at, writer_id
FROM raw_run_ends WHERE status = 'resumed'
QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY ended_at DESC) = 1;

-- A run's end: its own latest end wins over an `abandoned` one (`warehouse check --repair`'s
-- guess, stamped when it ran): a remote client's end, retried after a server restart, carries
-- its earlier time. A `resumed` row is no end: the run went on from a checkpoint (`adapt
-- --resume`), so an end before it holds no longer; only an `abandoned` one after it (the
-- resuming process died) or an end of the resumed run's own does.
CREATE OR REPLACE VIEW run_ends AS
WITH ends AS (SELECT * EXCLUDE (date) FROM raw_run_ends WHERE status <> 'resumed'),
own AS (SELECT run_id, max(ended_at) FILTER (WHERE status <> 'abandoned') AS own_at
        FROM ends GROUP BY run_id)
SELECT ends.* FROM ends JOIN own USING (run_id) LEFT JOIN run_resumes g USING (run_id)
WHERE g.resumed_at IS NULL OR own_at > g.resumed_at
   OR (status = 'abandoned' AND ended_at > g.resumed_at)
QUALIFY row_number() OVER (PARTITION BY run_id
                           ORDER BY status = 'abandoned', ended_at DESC) = 1;

-- Runs rows are immutable; status comes from run_ends. A run with no end is 'running' while
-- the writer going on with it (its resume's, else its start's) has a live lease
-- (live_writers, listed when the catalog was built), else 'abandoned': its process died or
-- closed without ending it, and never will.
CREATE OR REPLACE VIEW runs AS
SELECT r.* EXCLUDE (date),
       CASE WHEN e.status IS NOT NULL THEN e.status
            WHEN coalesce(g.writer_id, r.writer_id) IN (SELECT writer_id FROM live_writers)
                THEN 'running'
            ELSE 'abandoned' END AS status,
       e.ended_at, e.steps AS steps_taken, e.wall_time_s, e.error
FROM raw_runs r LEFT JOIN run_ends e USING (run_id) LEFT JOIN run_resumes g USING (run_id);

CREATE OR REPLACE VIEW ir_snapshots AS SELECT * EXCLUDE (date) FROM raw_ir_snapshots;

-- Patterns are a function of the fingerprint; several writers may log the same one.
CREATE OR REPLACE VIEW ir_patterns AS
SELECT fingerprint, pattern, any_value(value) AS value
FROM raw_ir_patterns GROUP BY fingerprint, pattern;

CREATE OR REPLACE VIEW steps AS SELECT * EXCLUDE (date) FROM raw_steps;
CREATE OR REPLACE VIEW events AS SELECT * EXCLUDE (date) FROM raw_events;
CREATE OR REPLACE VIEW results AS SELECT * EXCLUDE (date) FROM raw_results;

-- The path a run took. A rollback takes the run back to an earlier step and logs the step
-- numbers from there again under the next trajectory (the run's rollbacks before the row;
-- NULL, logged before the column, reads as 0): a row of one trajectory at or past the
-- start of a later one is of a discarded branch. A trajectory starts at its first step row
-- and at the target (`to_step`) of the rollback that began it, so a run that ended right
-- after a rollback, before logging another row, still drops the branch it went back from.
-- A rollback names the trajectory it began (`trajectory` in its detail, a JSON integer);
-- one logged before that field is placed by order: a run's rollbacks that went back (a
-- `give_up` names no target), in the order logged, begin its trajectories 1, 2, ...; a
-- fork's count on from its first row's (it starts at its parent's count: a guess, wrong for
-- a fork that rolled back before its first row). A run logged before the column numbers no
-- row: its rollbacks cut nothing. `cut` is the least start of the later trajectories.
-- A rollback's `to_step` and `trajectory` count only as JSON integers that fit a BIGINT
-- (json_type BIGINT or UBIGINT, then TRY_CAST): a string ("2"), a fraction (1.5, which the
-- cast alone would round to 2) or a whole number written as a float (2.0, 1e2) names
-- nothing: a rollback without a target went nowhere (`run_view.json_bigint`, the twin).
-- (Steps are compared as BIGINT explicitly: a part of another type, which `warehouse check`
-- names, must not keep the views from being made.)
CREATE OR REPLACE VIEW trajectory_cuts AS
WITH firsts AS (
    SELECT run_id, coalesce(TRY_CAST(trajectory AS BIGINT), 0) AS trajectory,
           min(TRY_CAST(step AS BIGINT)) AS first_step,
           bool_or(TRY_CAST(trajectory AS BIGINT) IS NOT NULL) AS numbered
    FROM steps GROUP BY ALL
), bases AS (
    SELECT f.run_id, CASE WHEN k.run_id IS NULL THEN 0 ELSE min(f.trajectory) END AS base
    FROM firsts f
    LEFT JOIN (SELECT DISTINCT run_id FROM raw_runs WHERE parent_run_id IS NOT NULL) k
           USING (run_id)
    GROUP BY f.run_id, k.run_id HAVING bool_or(f.numbered)
), rollbacks AS (
    SELECT run_id, to_step, began,
           row_number() OVER (PARTITION BY run_id ORDER BY "at", step) AS n
    FROM (SELECT run_id, TRY_CAST(step AS BIGINT) AS step, "at",
                 CASE WHEN TRY(json_type(detail, '$.to_step')) IN ('BIGINT', 'UBIGINT')
                      THEN TRY_CAST(TRY(json_extract_string(detail, '$.to_step')) AS BIGINT)
                      END AS to_step,
                 CASE WHEN TRY(json_type(detail, '$.trajectory')) IN ('BIGINT', 'UBIGINT')
                      THEN TRY_CAST(TRY(json_extract_string(detail, '$.trajectory')) AS BIGINT)
                      END AS began
          FROM events WHERE kind = 'rollback')
    WHERE to_step IS NOT NULL
), starts AS (
    SELECT run_id, trajectory, first_step AS step FROM firsts
    UNION ALL
    SELECT run_id, coalesce(r.began, b.base + r.n), r.to_step
    FROM rollbacks r JOIN bases b USING (run_id)
)
SELECT a.run_id, a.trajectory, min(b.step) AS cut
FROM firsts a JOIN starts b ON a.run_id = b.run_id AND b.trajectory > a.trajectory
GROUP BY ALL;

CREATE OR REPLACE VIEW live_steps AS
SELECT s.* FROM steps s
LEFT JOIN trajectory_cuts c
       ON s.run_id = c.run_id AND coalesce(TRY_CAST(s.trajectory AS BIGINT), 0) = c.trajectory
WHERE c.cut IS NULL OR TRY_CAST(s.step AS BIGINT) < c.cut;

-- A result at the cut measured the model the rollback went back to: it stays.
CREATE OR REPLACE VIEW live_results AS
SELECT r.* FROM results r
LEFT JOIN trajectory_cuts c
       ON r.run_id = c.run_id AND coalesce(TRY_CAST(r.trajectory AS BIGINT), 0) = c.trajectory
WHERE c.cut IS NULL OR TRY_CAST(r.step AS BIGINT) <= c.cut;
CREATE OR REPLACE VIEW kernel_tuning AS SELECT * EXCLUDE (date) FROM raw_kernel_tuning;
