-- report: pattern_performance
-- Per structural pattern value: how many scored runs ended with it, on how many problems,
-- and their normalized score (see run_scores): mean, median, sd and a 95 % t interval.
-- params: pattern=, problem=, min_runs=1
WITH x AS (
    SELECT rp.pattern, rp.value, sc.problem_id, sc.norm_score
    FROM run_patterns rp JOIN run_scores sc USING (run_id)
    JOIN runs r USING (run_id)
    WHERE ($pattern IS NULL OR rp.pattern = $pattern)
      AND ($problem IS NULL OR r.problem_name = $problem OR r.problem_id = $problem)
), g AS (
    SELECT pattern, value, count(*) AS runs, count(DISTINCT problem_id) AS problems,
           avg(norm_score) AS mean_norm_score, median(norm_score) AS median_norm_score,
           stddev_samp(norm_score) AS sd
    FROM x GROUP BY pattern, value
)
SELECT pattern, value, runs, problems, mean_norm_score, median_norm_score, sd,
       mean_norm_score - t975(runs - 1) * sd / sqrt(runs) AS ci95_low,
       mean_norm_score + t975(runs - 1) * sd / sqrt(runs) AS ci95_high
FROM g WHERE runs >= $min_runs
ORDER BY pattern, value
