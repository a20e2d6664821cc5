-- report: feature_pattern_correlation
-- Does a pattern help more on some problems? Per problem, the effect of a pattern is the
-- correlation between its value and the runs' normalized score (problems with at least 3
-- scored runs where the pattern varies). Across problems, this report correlates that
-- effect with each problem meta-feature.
-- params: min_problems=3
WITH within AS (
    SELECT sc.problem_id, rp.pattern, corr(rp.value, sc.norm_score) AS effect
    FROM run_patterns rp JOIN run_scores sc USING (run_id)
    GROUP BY sc.problem_id, rp.pattern
    HAVING count(*) >= 3 AND stddev_pop(rp.value) > 0
)
SELECT f.feature, w.pattern, count(*) AS problems,
       corr(f.value, w.effect) AS correlation, avg(w.effect) AS mean_effect
FROM within w JOIN problem_features f USING (problem_id)
WHERE isfinite(w.effect) AND isfinite(f.value)
GROUP BY f.feature, w.pattern
HAVING count(*) >= $min_problems
-- (DuckDB's corr is NaN, not NULL, where a feature is constant across the problems: such
-- an undefined correlation sorts last, not first)
ORDER BY CASE WHEN isfinite(corr(f.value, w.effect)) THEN abs(corr(f.value, w.effect)) END
         DESC NULLS LAST, f.feature, w.pattern
