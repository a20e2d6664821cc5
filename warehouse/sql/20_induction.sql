-- What `aicf-induct induce fit` mined: each fit appends its correlations and rules under a
-- new fit_id (raw_correlations, raw_rules keep every fit) and one row to raw_fits, written
-- whatever it mined; these views keep the latest fit's rows, so a fit that mined no
-- correlations, no rules or neither shows none, not an older fit's. The two mined tables
-- join the union for warehouses written before `fits` existed.
CREATE OR REPLACE VIEW latest_fit AS
SELECT fit_id, fitted_at FROM (SELECT fit_id, fitted_at FROM raw_fits UNION ALL
                               SELECT fit_id, fitted_at FROM raw_correlations UNION ALL
                               SELECT fit_id, fitted_at FROM raw_rules)
ORDER BY fitted_at DESC, fit_id LIMIT 1;

CREATE OR REPLACE VIEW correlations AS
SELECT * EXCLUDE (date) FROM raw_correlations WHERE fit_id = (SELECT fit_id FROM latest_fit);

CREATE OR REPLACE VIEW rules AS
SELECT * EXCLUDE (date) FROM raw_rules WHERE fit_id = (SELECT fit_id FROM latest_fit);

CREATE OR REPLACE VIEW fits AS SELECT * EXCLUDE (date) FROM raw_fits;
