-- uac.Alert v2 adds the duplicate-therapy finding (the two prescriptions, what they share,
-- the knowledge release). Added to tables created before it; NULL on older rows.
ALTER TABLE uac.alerts ADD COLUMN IF NOT EXISTS duplicate_therapy Nullable(String) AFTER drug_allergy;
