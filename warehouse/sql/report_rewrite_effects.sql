-- report: rewrite_effects
-- The change of each metric across each kind of rewrite (events with kind 'rewrite'; name =
-- the transform): after - before, with mean, median, a 95 % t interval and the share of
-- rewrites where the metric went up.
-- params: transform=, problem=
-- An event whose metrics are not JSON text (the service refuses them since; an older one may
-- have stored some) is left out, not the report failed on.
WITH rw AS (
    SELECT e.name AS transform, e.run_id, e.metrics_before, e.metrics_after,
           unnest(json_keys(e.metrics_before)) AS metric
    FROM events e JOIN runs r USING (run_id)
    WHERE e.kind = 'rewrite' AND json_valid(e.metrics_before) AND json_valid(e.metrics_after)
      AND ($transform IS NULL OR e.name = $transform)
      AND ($problem IS NULL OR r.problem_name = $problem OR r.problem_id = $problem)
), d AS (
    SELECT transform, metric, run_id,
           TRY_CAST(metrics_before ->> metric AS DOUBLE) AS before,
           TRY_CAST(metrics_after ->> metric AS DOUBLE) AS after
    FROM rw
), g AS (
    SELECT transform, metric, count(*) AS rewrites, count(DISTINCT run_id) AS runs,
           avg(before) AS mean_before, avg(after) AS mean_after,
           avg(after - before) AS mean_change, median(after - before) AS median_change,
           stddev_samp(after - before) AS sd, avg((after > before)::INT) AS share_increased
    FROM d WHERE isfinite(before) AND isfinite(after)
    GROUP BY transform, metric
)
SELECT transform, metric, rewrites, runs, mean_before, mean_after, mean_change,
       median_change,
       mean_change - t975(rewrites - 1) * sd / sqrt(rewrites) AS ci95_low,
       mean_change + t975(rewrites - 1) * sd / sqrt(rewrites) AS ci95_high,
       share_increased
FROM g ORDER BY transform, metric
