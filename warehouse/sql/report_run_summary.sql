-- report: run_summary
-- One row per run, newest first: problem, status, steps, loss, step time, rewrites and
-- rollbacks, the structure it ended with, and its score.
-- params: problem=, status=, origin=, limit=1000
-- logged_steps and mean_step_ms count every step row, a branch a rollback dropped
-- included; live_steps and the losses are of the path the run took (the live_steps view).
WITH st AS (
    SELECT run_id, count(*) AS logged_steps, avg(step_time_s) * 1000 AS mean_step_ms
    FROM steps GROUP BY run_id
), live AS (
    SELECT run_id, count(*) AS live_steps, arg_max(loss, step) AS last_loss,
           min(loss) AS min_loss
    FROM live_steps GROUP BY run_id
), ev AS (
    SELECT run_id, count(*) FILTER (WHERE kind = 'rewrite') AS rewrites,
           count(*) FILTER (WHERE kind = 'rollback') AS rollbacks
    FROM events GROUP BY run_id
)
SELECT r.run_id, r.problem_name, r.task, r.origin, r.status, r.seed, r.device,
       r.started_at, r.ended_at, coalesce(st.logged_steps, 0) AS logged_steps,
       coalesce(live.live_steps, 0) AS live_steps, live.last_loss, live.min_loss, st.mean_step_ms,
       coalesce(ev.rewrites, 0) AS rewrites, coalesce(ev.rollbacks, 0) AS rollbacks,
       s.fingerprint, s.param_count, sc.score_metric, sc.score, sc.norm_score,
       r.parent_run_id
FROM runs r
LEFT JOIN st USING (run_id)
LEFT JOIN live USING (run_id)
LEFT JOIN ev USING (run_id)
LEFT JOIN run_structure s USING (run_id)
LEFT JOIN run_scores sc USING (run_id)
WHERE ($problem IS NULL OR r.problem_name = $problem OR r.problem_id = $problem)
  AND ($status IS NULL OR r.status = $status)
  AND ($origin IS NULL OR r.origin = $origin)
ORDER BY r.started_at DESC, r.run_id
LIMIT $limit
