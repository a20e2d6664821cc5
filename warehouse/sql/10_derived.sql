-- Derived views the reports share, and the induction layer builds on.

-- The structure a run ended with: its `final` snapshot; a run with none (interrupted,
-- failed) its snapshot logged last. Not the one of the highest step: after a rollback a
-- snapshot of the branch it dropped (a rewrite at step 100, the rollback to 74) has a
-- higher step than the structure the run went on with.
CREATE OR REPLACE VIEW run_structure AS
SELECT run_id, fingerprint, param_count, step AS structure_step
FROM ir_snapshots
QUALIFY row_number() OVER (PARTITION BY run_id
                           ORDER BY reason = 'final' DESC, recorded_at DESC, step DESC) = 1;

-- The patterns of that final structure, one row per (run, pattern) of every pattern the
-- warehouse knows: one its structure lacks (no `act.tanh` row for a relu model) is 0, as
-- the induction layer counts it (a structure logs only the ops and motifs it has).
CREATE OR REPLACE VIEW run_patterns AS
SELECT s.run_id, k.pattern, coalesce(p.value, 0) AS value
FROM run_structure s
CROSS JOIN (SELECT DISTINCT pattern FROM ir_patterns) k
LEFT JOIN ir_patterns p ON p.fingerprint = s.fingerprint AND p.pattern = k.pattern;

-- A run's score: its final test (else validation) accuracy for classification, R² for
-- regression; higher is better. norm_score makes scores comparable across problems: the
-- run's average rank among the problem's scored runs, scaled to [0, 1] (1 = best; 0.5 when
-- the problem has one run). Non-finite scores (diverged runs) rank last.
CREATE OR REPLACE VIEW run_scores AS
WITH f AS (
    SELECT r.run_id, r.problem_id, r.task, res.split, res.metric, res.value
    FROM runs r JOIN results res USING (run_id)
    -- only runs that ended on their own: a run interrupted, or killed between its results
    -- and its end, is trained again by a resumed sweep; scoring both would double count
    WHERE res.final AND r.status NOT IN ('running', 'abandoned', 'interrupted')
      AND res.split IN ('test', 'val')
      AND res.metric = CASE r.task WHEN 'regression' THEN 'r2' ELSE 'accuracy' END
    QUALIFY row_number() OVER (PARTITION BY r.run_id
                               ORDER BY (res.split = 'test') DESC, res.step DESC) = 1
), k AS (
    SELECT *, CASE WHEN isfinite(value) THEN value ELSE -1e308 END AS sort_value FROM f
)
SELECT run_id, problem_id, task, metric AS score_metric, split AS score_split,
       value AS score,
       CASE WHEN count(*) OVER p = 1 THEN 0.5
            ELSE ((rank() OVER o + cume_dist() OVER o * count(*) OVER p) / 2 - 1)
                 / (count(*) OVER p - 1)
       END AS norm_score
FROM k
WINDOW p AS (PARTITION BY problem_id), o AS (PARTITION BY problem_id ORDER BY sort_value);

-- Two-sided 95 % Student t quantiles by degrees of freedom (normal 1.96 past 30), for the
-- reports' confidence intervals: mean ± t975(n - 1) · sd / sqrt(n).
CREATE OR REPLACE MACRO t975(df) AS CASE
    WHEN df IS NULL OR df < 1 THEN NULL
    WHEN df > 30 THEN 1.96
    ELSE [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
          2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
          2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042][df]
END;
