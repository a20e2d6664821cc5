-- report: leaderboard
-- Best structures per problem: scored runs grouped by the structure (fingerprint) they
-- ended with, ranked within the problem by mean score, then by fewer parameters. A run whose
-- score is not finite (it diverged) counts in `diverged`, not in the mean or best score
-- (a NaN there made both NaN); its normalized score is its problem's lowest. `score_split`:
-- the split the scores are of (`test`, or `val` for runs that logged no test result;
-- `test, val` when the structure's runs differ).
-- params: problem=, top=5
WITH per AS (
    SELECT r.problem_id, any_value(r.problem_name) AS problem_name, s.fingerprint,
           any_value(s.param_count) AS param_count, any_value(sc.score_metric) AS metric,
           count(*) AS runs, count(*) FILTER (WHERE NOT isfinite(sc.score)) AS diverged,
           avg(sc.score) FILTER (WHERE isfinite(sc.score)) AS mean_score,
           max(sc.score) FILTER (WHERE isfinite(sc.score)) AS best_score,
           avg(sc.norm_score) AS mean_norm_score,
           string_agg(DISTINCT sc.score_split, ', ' ORDER BY sc.score_split) AS score_split
    FROM runs r
    JOIN run_structure s USING (run_id)
    JOIN run_scores sc USING (run_id)
    WHERE $problem IS NULL OR r.problem_name = $problem OR r.problem_id = $problem
    GROUP BY r.problem_id, s.fingerprint
), ranked AS (
    SELECT row_number() OVER (PARTITION BY problem_id
                              ORDER BY mean_score DESC NULLS LAST, param_count, fingerprint)
               AS rank, *
    FROM per
)
SELECT problem_name, rank, fingerprint, param_count, runs, metric, mean_score, best_score,
       mean_norm_score, problem_id, diverged, score_split
FROM ranked WHERE rank <= $top
ORDER BY problem_name, rank
