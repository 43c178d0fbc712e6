-- Row policies: a fourth tenant-isolation layer for a ClickHouse server, under the three layers
-- of the query layer (`streams/analytics.py`). It binds every row an analyst account can read
-- to the tenant of that account, whatever SQL the account sends, through the query layer or
-- straight to the server.
--
-- Mechanism: each policy keeps the rows whose `tenant_id` equals the custom setting
-- `SQL_uac_tenant`. The setting is fixed per account by a settings profile with a CONST
-- constraint, so the account cannot change it (SET, a SETTINGS clause and an HTTP parameter
-- are all refused); an account without the setting gets an error from `getSetting`, never rows.
--
-- Applying it on a server:
--   1. allow the custom setting prefix in the server config (config.d/uac.xml):
--        <clickhouse><custom_settings_prefixes>SQL_</custom_settings_prefixes></clickhouse>
--      (ClickHouse Cloud always allows SQL_);
--   2. as an administrator with access management, after deploy/clickhouse/*.sql:
--        clickhouse-client --multiquery < deploy/clickhouse/server/row_policies.sql
--   3. per tenant and analyst account, for example:
--        CREATE SETTINGS PROFILE IF NOT EXISTS uac_tenant_clinic_a
--            SETTINGS SQL_uac_tenant = 'clinic-a' CONST;
--        CREATE USER IF NOT EXISTS analyst_clinic_a IDENTIFIED WITH sha256_password BY '...'
--            SETTINGS PROFILE 'uac_tenant_clinic_a';
--        GRANT uac_analyst TO analyst_clinic_a;
--        ALTER USER analyst_clinic_a DEFAULT ROLE uac_analyst;
--   The sink's account must not get the role: it writes and erases rows of every tenant. Since
--   a table with row policies hides its rows from accounts none of its policies names only when
--   `users_without_row_policies_can_read_rows` is false (true by default in recent releases),
--   give every analyst account this role and keep the sink's account for the sink.
--
-- What was checked here: only the syntax. The embedded engine (chDB 4.4, ClickHouse 26.9) runs
-- as the `default` user without access management: CREATE ROLE, CREATE ROW POLICY and CREATE
-- SETTINGS PROFILE fail with ACCESS_DENIED, and `getSetting('SQL_uac_tenant')` fails with
-- UNKNOWN_SETTING because no custom prefix is configured. `tests/unit/test_analytics.py` parses
-- every statement below with `EXPLAIN AST` on chDB; the policies' effect on a server (and the
-- CONST constraint) has not been exercised in this repository's test suite.

CREATE ROLE IF NOT EXISTS uac_analyst;

GRANT SELECT ON uac.* TO uac_analyst;

-- The query layer records every read in uac.audit_reads before it returns a result, through the
-- analyst's own connection: the role may append audit rows (not alter or delete them).
GRANT INSERT ON uac.audit_reads TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.events
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.gate_decisions
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.alerts
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.state_checkpoints
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.erasures
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;

CREATE ROW POLICY IF NOT EXISTS uac_tenant_rows ON uac.audit_reads
    FOR SELECT USING tenant_id = getSetting('SQL_uac_tenant') TO uac_analyst;
