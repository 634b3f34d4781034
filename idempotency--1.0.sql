/* idempotency--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

--
-- Internal tables live in their own schema, "idempotency".  The functions
-- and views users call live in the extension's schema (public by default),
-- so they need no qualification.
--
CREATE SCHEMA idempotency;
COMMENT ON SCHEMA idempotency IS 'internal tables of the idempotency extension';

CREATE SEQUENCE idempotency.namespace_id_seq AS integer;

CREATE TABLE idempotency.namespaces (
    id          integer     NOT NULL DEFAULT nextval('idempotency.namespace_id_seq'),
    name        text        NOT NULL,
    ttl         interval    NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT namespaces_pkey PRIMARY KEY (id),
    CONSTRAINT namespaces_name_key UNIQUE (name),
    CONSTRAINT namespaces_name_check CHECK (octet_length(name) BETWEEN 1 AND 128),
    CONSTRAINT namespaces_ttl_check CHECK (ttl > interval '0' AND ttl <= interval '100 years')
);
ALTER SEQUENCE idempotency.namespace_id_seq OWNED BY idempotency.namespaces.id;
COMMENT ON TABLE idempotency.namespaces IS 'claim namespaces and the TTL of their claims';

-- Any change to namespaces, by our functions or by hand, must reach the
-- per-backend caches.
CREATE FUNCTION idempotency.idem_namespaces_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'idem_namespaces_changed' LANGUAGE C;
CREATE TRIGGER namespaces_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.namespaces
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_namespaces_changed();

-- One row per claim, kept small: see "Storage" in the README.  key is the
-- event id in the exact compact encoding of src/claimkey.c; fingerprint is
-- a 64-bit hash of the claim's fingerprint.  Column order matters to the C
-- code (src/catalog.h).  The index leads with key, which nearly always
-- decides a comparison on its own, so a probe calls one comparison function
-- per index tuple instead of two.
CREATE TABLE idempotency.claims (
    claimed_at  timestamptz NOT NULL,
    ns          integer     NOT NULL,
    key         bytea       NOT NULL,
    fingerprint bigint,
    CONSTRAINT claims_pkey PRIMARY KEY (key, ns)
);
COMMENT ON TABLE idempotency.claims IS 'claimed event ids; use the idem_claims view to read them';

-- pg_dump must carry the claims: a restore that forgot them would process
-- every event again.
SELECT pg_catalog.pg_extension_config_dump('idempotency.namespaces', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.namespace_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.claims', '');

--
-- Claims
--
CREATE FUNCTION idem_claim(event_id text, namespace text DEFAULT 'default',
                           fingerprint text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim(text, text, text) IS
    'claim an event id in this transaction: true the first time, false for a duplicate';

CREATE FUNCTION idem_try_claim(event_id text, namespace text DEFAULT 'default',
                               fingerprint text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_try_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_try_claim(text, text, text) IS
    'as idem_claim, but NULL at once instead of waiting for an in-flight claimer';

CREATE FUNCTION idem_claim_many(event_ids text[], namespace text DEFAULT 'default')
    RETURNS SETOF text
    AS 'MODULE_PATHNAME', 'idem_claim_many'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim_many(text[], text) IS
    'claim a batch of event ids; returns the ids newly claimed';

CREATE FUNCTION idem_claimed(event_id text, namespace text DEFAULT 'default')
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_claimed'
    LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_claimed(text, text) IS
    'read-only check: does a live claim exist?';

CREATE FUNCTION idem_release(event_id text, namespace text DEFAULT 'default')
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_release'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_release(text, text) IS
    'remove a claim so that the event may be processed again';

CREATE FUNCTION idem_namespace_define(namespace text, ttl interval)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_namespace_define'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_namespace_define(text, interval) IS
    'create a namespace, or change the TTL of its claims';

CREATE FUNCTION idem_claim_trigger()
    RETURNS trigger
    AS 'MODULE_PATHNAME', 'idem_claim_trigger'
    LANGUAGE C;
COMMENT ON FUNCTION idem_claim_trigger() IS
    'BEFORE INSERT row trigger: claim the row''s id, skip duplicate rows; arguments: id column, namespace, fingerprint column';

--
-- Views
--
CREATE FUNCTION idempotency.idem_key_text(bytea)
    RETURNS text
    AS 'MODULE_PATHNAME', 'idem_key_text'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE VIEW idem_claims AS
    SELECT n.name                          AS namespace,
           idempotency.idem_key_text(c.key) AS event_id,
           c.claimed_at,
           e.expires_at,
           e.expires_at < now()            AS expired,
           c.fingerprint                   AS fingerprint_hash
      FROM idempotency.claims c
      JOIN idempotency.namespaces n ON n.id = c.ns
     CROSS JOIN LATERAL
           -- calendar arithmetic in UTC, as the C code does
           (SELECT ((c.claimed_at AT TIME ZONE 'UTC') + n.ttl) AT TIME ZONE 'UTC'
                   AS expires_at) e;
COMMENT ON VIEW idem_claims IS 'stored claims, expired ones included until purged';

CREATE FUNCTION idempotency.idem_stats_read(
        OUT ns integer,
        OUT claims bigint,
        OUT duplicates bigint,
        OUT waits bigint,
        OUT fingerprint_mismatches bigint,
        OUT takeovers bigint,
        OUT busy bigint,
        OUT releases bigint)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'idem_stats_read'
    LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW idem_stats AS
    SELECT n.name AS namespace,
           s.claims, s.duplicates, s.waits, s.fingerprint_mismatches,
           s.takeovers, s.busy, s.releases
      FROM idempotency.idem_stats_read() s
      JOIN idempotency.namespaces n ON n.id = s.ns;
COMMENT ON VIEW idem_stats IS
    'per-namespace counters since server start (needs shared_preload_libraries)';

CREATE FUNCTION idem_stats_reset()
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_stats_reset'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_stats_reset() IS 'zero the idem_stats counters of this database';

--
-- Privileges.  Claims are governed by table privileges on
-- idempotency.claims, checked as the caller: INSERT to claim, SELECT to
-- check, DELETE to release.  Nobody but the owner has them until granted.
-- Defining namespaces and resetting statistics are for administrators.
--
REVOKE ALL ON FUNCTION idem_namespace_define(text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idem_namespaces_changed() FROM PUBLIC;
GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
GRANT SELECT ON idempotency.namespaces TO PUBLIC;
GRANT SELECT ON idem_stats TO PUBLIC;

-- With security_invoker (PostgreSQL 15 and later), reading idem_claims
-- needs SELECT on idempotency.claims, like any other read of claims.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW idem_claims SET (security_invoker = true);
        GRANT SELECT ON idem_claims TO PUBLIC;
    END IF;
END
$$;
