-- What `aicf-induct induce fit` mined: each fit appends its correlations and rules under a
-- new fit_id (raw_correlations, raw_rules keep every fit); these views keep the latest fit,
-- the latest of either table: a fit that mined no correlations (or no rules) shows none, not
-- an older fit's. (A fit that mined neither leaves no row to know it by.)
CREATE OR REPLACE VIEW correlations AS
SELECT * EXCLUDE (date) FROM raw_correlations
WHERE fit_id = (SELECT fit_id FROM (SELECT fit_id, fitted_at FROM raw_correlations UNION ALL
                                   SELECT fit_id, fitted_at FROM raw_rules)
                ORDER BY fitted_at DESC, fit_id LIMIT 1);

CREATE OR REPLACE VIEW rules AS
SELECT * EXCLUDE (date) FROM raw_rules
WHERE fit_id = (SELECT fit_id FROM (SELECT fit_id, fitted_at FROM raw_correlations UNION ALL
                                   SELECT fit_id, fitted_at FROM raw_rules)
                ORDER BY fitted_at DESC, fit_id LIMIT 1);
