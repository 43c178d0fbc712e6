-- uac.Alert v3 adds the purpose the claims behind an alert were recorded for (the purpose the
-- alert may be read for). Added to tables created before it; older rows read as care, the
-- purpose of every alert record written before v3.
ALTER TABLE uac.alerts ADD COLUMN IF NOT EXISTS purpose LowCardinality(String) DEFAULT 'care' AFTER reason;
