/* idempotency--1.0--1.1.sql: ordered-stream watermarks and per-namespace privileges */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.1'" to load this file. \quit

--
-- Watermarks of ordered streams (1.1)
--
CREATE TABLE idempotency.watermarks (
    stream      text COLLATE "C" NOT NULL,
    partition   integer NOT NULL,
    seq         bigint NOT NULL,
    epoch       bigint,
    updated_at  timestamptz NOT NULL,
    -- idem_advance checks its arguments (a stream of 1 to 256 bytes, a
    -- partition, seq and epoch not negative); no CHECK constraint here,
    -- whose evaluation would cost each advance more than the rest of it
    CONSTRAINT watermarks_pkey PRIMARY KEY (stream, partition)
) WITH (fillfactor = 70);   -- room on each page for HOT updates of the marks
ALTER TABLE idempotency.watermarks ALTER COLUMN stream SET STORAGE MAIN;
COMMENT ON TABLE idempotency.watermarks IS
    'high-water marks of ordered stream partitions; read them through idem_streams';
SELECT pg_catalog.pg_extension_config_dump('idempotency.watermarks', '');

CREATE FUNCTION idem_advance(stream text, partition integer, seq bigint,
                             epoch bigint DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_advance'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_advance(text, integer, bigint, bigint) IS
    'move the mark of (stream, partition) to seq in this transaction: true if seq is above it, false for a redelivery';

CREATE FUNCTION idem_watermark(stream text, partition integer)
    RETURNS bigint
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF stream IS NULL THEN
        RAISE EXCEPTION 'stream must not be null' USING ERRCODE = '22004';
    END IF;
    IF partition IS NULL THEN
        RAISE EXCEPTION 'partition must not be null' USING ERRCODE = '22004';
    END IF;
    RETURN (SELECT w.seq FROM idempotency.watermarks w
             WHERE w.stream = idem_watermark.stream COLLATE "C"
               AND w.partition = idem_watermark.partition);
END
$$;
COMMENT ON FUNCTION idem_watermark(text, integer) IS
    'the committed mark of (stream, partition), NULL if none: seek the broker to mark + 1 on start-up';

CREATE FUNCTION idem_stream_drop(stream text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    IF stream IS NULL THEN
        RAISE EXCEPTION 'stream must not be null' USING ERRCODE = '22004';
    END IF;
    DELETE FROM idempotency.watermarks w WHERE w.stream = idem_stream_drop.stream COLLATE "C";
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION idem_stream_drop(text) IS
    'forget every partition mark of a stream; returns the partitions dropped';
REVOKE ALL ON FUNCTION idem_stream_drop(text) FROM PUBLIC;

CREATE VIEW idem_streams AS
    SELECT w.stream, w.partition, w.seq AS mark, w.epoch, w.updated_at
      FROM idempotency.watermarks w;
COMMENT ON VIEW idem_streams IS 'the marks of ordered stream partitions';
-- as idem_claims: reading it needs SELECT on idempotency.watermarks
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW idem_streams SET (security_invoker = true);
        GRANT SELECT ON idem_streams TO PUBLIC;
    END IF;
END
$$;

--
-- Per-namespace privileges (1.1)
--
-- A namespace with any grant here is restricted: only its grantees (and
-- the roles that have their privileges) and superusers may claim, check
-- or release in it.  Keyed by name, so that a namespace can be restricted
-- before its first claim.  grantee is a regrole, so that pg_dump writes
-- role names and a restore into another cluster maps them.
CREATE TABLE idempotency.namespace_grants (
    namespace   text COLLATE "C" NOT NULL
                -- the names idem_claim takes: 1 to 128 bytes, no 0x1f
                CONSTRAINT namespace_grants_namespace_check
                CHECK (octet_length(namespace) BETWEEN 1 AND 128
                       AND strpos(namespace, E'\x1f') = 0),
    grantee     regrole NOT NULL,
    privilege   text COLLATE "C" NOT NULL
                CONSTRAINT namespace_grants_privilege_check
                CHECK (privilege IN ('claim', 'check', 'release')),
    granted_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT namespace_grants_pkey PRIMARY KEY (namespace, grantee, privilege)
);
COMMENT ON TABLE idempotency.namespace_grants IS
    'per-namespace privileges; change them with idem_namespace_grant and idem_namespace_revoke';
SELECT pg_catalog.pg_extension_config_dump('idempotency.namespace_grants', '');
-- every backend caches the grants: see idem_table_changed
CREATE TRIGGER namespace_grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.namespace_grants
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_table_changed();

CREATE FUNCTION idem_namespace_grant(namespace text, role regrole, privilege text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_namespace_grant'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_namespace_grant(text, regrole, text) IS
    'let role claim, check or release in namespace, which becomes restricted; false if it held the privilege';

CREATE FUNCTION idem_namespace_revoke(namespace text, role regrole, privilege text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_namespace_revoke'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_namespace_revoke(text, regrole, text) IS
    'take back a namespace privilege; false if role did not hold it';
REVOKE ALL ON FUNCTION idem_namespace_grant(text, regrole, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_namespace_revoke(text, regrole, text) FROM PUBLIC;

CREATE FUNCTION idempotency.idem_namespace_visible(name text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_namespace_visible'
    LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION idempotency.idem_namespace_visible(text) IS
    'may the current user check claims in this stored namespace? the filter of idem_claims';

-- Statements on idempotency.claims itself honour the grants too: row-level
-- security with these policies, for every role but the table's owner (the
-- purge, pg_dump as a superuser).  The claim functions check the same
-- grants themselves, so they accept these policies, and refuse any other.
CREATE FUNCTION idempotency.idem_namespace_allows(ns integer, privilege text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_namespace_allows'
    LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION idempotency.idem_namespace_allows(integer, text) IS
    'may the current user claim, check or release in the namespace with this id? the policies on idempotency.claims';
-- The same policies on every generation, whose table can be named directly
-- (pg_read_all_data can read it): here for those made at 1.0, and by the
-- code for every new one.
CREATE FUNCTION idempotency.idem_claims_policies(rel regclass)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- only the claims table or one of its generations (a table inheriting
    -- from it): any other relation, or none, is refused before any DDL
    IF rel IS NULL OR NOT (rel OPERATOR(pg_catalog.=) 'idempotency.claims'::pg_catalog.regclass
                           OR EXISTS (SELECT FROM pg_catalog.pg_inherits i
                                       WHERE i.inhrelid OPERATOR(pg_catalog.=) rel
                                         AND i.inhparent OPERATOR(pg_catalog.=) 'idempotency.claims'::pg_catalog.regclass)) THEN
        RAISE EXCEPTION 'relation % is neither idempotency.claims nor one of its generations',
                        coalesce(NULLIF(rel::pg_catalog.text, '-'), rel::pg_catalog.oid::pg_catalog.text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The namespace policies go on idempotency.claims and the tables inheriting from it.';
    END IF;
    EXECUTE format('CREATE POLICY claims_namespace_check ON %s FOR SELECT'
                   ' USING (idempotency.idem_namespace_allows(ns, %L))', rel, 'check');
    EXECUTE format('CREATE POLICY claims_namespace_claim ON %s FOR INSERT'
                   ' WITH CHECK (idempotency.idem_namespace_allows(ns, %L))', rel, 'claim');
    EXECUTE format('CREATE POLICY claims_namespace_release ON %s FOR DELETE'
                   ' USING (idempotency.idem_namespace_allows(ns, %L))', rel, 'release');
    EXECUTE format('CREATE POLICY claims_namespace_update ON %s FOR UPDATE'
                   ' USING (idempotency.idem_namespace_allows(ns, %L))'
                   ' WITH CHECK (idempotency.idem_namespace_allows(ns, %L))', rel, 'claim', 'claim');
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', rel);
END
$$;
COMMENT ON FUNCTION idempotency.idem_claims_policies(regclass) IS
    'create the namespace policies on the claims or one of their generations';
REVOKE ALL ON FUNCTION idempotency.idem_claims_policies(regclass) FROM PUBLIC;
SELECT idempotency.idem_claims_policies('idempotency.claims');
SELECT idempotency.idem_claims_policies(i.inhrelid::pg_catalog.regclass)
  FROM pg_catalog.pg_inherits i
 WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.claims'::pg_catalog.regclass;

CREATE VIEW idem_namespace_privileges AS
    SELECT g.namespace, g.grantee, g.privilege, g.granted_at
      FROM idempotency.namespace_grants g;
COMMENT ON VIEW idem_namespace_privileges IS 'the grants of restricted namespaces';

-- idem_claims shows only the claims of namespaces the reader may check.
-- CREATE OR REPLACE VIEW resets the view's options: set them again.
CREATE OR REPLACE VIEW idem_claims AS
    SELECT pg_catalog.split_part(n.name, E'\x1f', 1) AS namespace,
           idempotency.idem_key_text(c.key) AS event_id,
           c.claimed_at,
           e.expires_at,
           e.expires_at < now()            AS expired,
           c.fingerprint                   AS fingerprint_hash
      FROM idempotency.claims c
      JOIN idem_namespaces n ON n.id = c.ns
     CROSS JOIN LATERAL
           (SELECT idempotency.idem_expires_at(c.claimed_at, n.ttl) AS expires_at) e
     WHERE idempotency.idem_namespace_visible(n.name);
-- as idem_claims: reading the grants needs SELECT on their table
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW idem_claims SET (security_invoker = true);
        ALTER VIEW idem_namespace_privileges SET (security_invoker = true);
        GRANT SELECT ON idem_namespace_privileges TO PUBLIC;
    END IF;
END
$$;

--
-- What shared memory holds of each sealed generation's filter (1.1)
--
CREATE FUNCTION idempotency.idem_generation_filter(generation integer) RETURNS text
    AS 'MODULE_PATHNAME', 'idem_generation_filter'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_generation_filter(integer) IS
    'what shared memory holds of a sealed generation''s filter: a stripe lane, its finer filter, the stored one, or NULL';

CREATE OR REPLACE VIEW idem_generations AS
    SELECT g.id, g.ttl_class,
           make_interval(secs => 2 ^ g.ttl_class) AS ttl_class_from,
           g.state,
           ('idempotency.claims_g' || g.id)      AS relation,
           g.opened_at, g.closed_at, g.sealed_at,
           g.claims,
           pg_relation_size(to_regclass('idempotency.claims_g' || g.id)) AS heap_bytes,
           octet_length(g.filter)                AS filter_bytes,
           (SELECT max(idempotency.idem_expires_at(l.last, n.ttl))
              FROM unnest(g.namespaces, g.last_claimed) AS l(ns, last)
              JOIN idem_namespaces n ON n.id = l.ns) AS expires_at,
           idempotency.idem_generation_filter(g.id) AS filter_in_memory
      FROM idempotency.generations g;

--
-- Logical replication of the claims (1.1)
--
-- No key (a namespace may have several rows), so its replica identity is
-- the whole row: a publication that publishes updates and deletes (FOR
-- TABLES IN SCHEMA idempotency) would otherwise refuse the purge's and
-- idem_namespace_define's changes to it on the publisher.
ALTER TABLE idempotency.namespaces REPLICA IDENTITY FULL;

-- relhassubclass set here, once: the worker's first generation then writes
-- no pg_class row of the claims table, so it never races a GRANT or other
-- change of that row (two concurrent updates of one catalog row fail with
-- "tuple concurrently updated").  Creating and dropping a child sets it;
-- only an ANALYZE of the table while it has no generation clears it.
CREATE TABLE idempotency.claims_relhassubclass () INHERITS (idempotency.claims);
DROP TABLE idempotency.claims_relhassubclass;

--
-- Requests with HTTP-shaped results, request statistics, forgetting a
-- request, and one grant for an application role (1.1)
--
ALTER TABLE idempotency.requests
    ADD COLUMN response_status  integer,
    ADD COLUMN response_headers jsonb,
    ADD COLUMN response_body    bytea,
    ADD COLUMN heartbeat_at     timestamptz;

DROP FUNCTION idem_begin(text, text, text, interval, interval);
DROP FUNCTION idem_complete(text, uuid, jsonb, text);
DROP FUNCTION idem_fail(text, uuid, jsonb, boolean, text);
CREATE FUNCTION idem_begin(key text, namespace text DEFAULT 'default',
                           fingerprint text DEFAULT NULL,
                           lease interval DEFAULT '30 seconds',
                           wait interval DEFAULT NULL,
                           OUT status text, OUT owner uuid, OUT result jsonb,
                           OUT attempts integer, OUT lease_expires_at timestamptz,
                           OUT response_status integer, OUT response_headers jsonb,
                           OUT response_body bytea, OUT retry_after interval)
    RETURNS record
    AS 'MODULE_PATHNAME', 'idem_begin'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_begin(text, text, text, interval, interval) IS
    'start work on a key: started, in_progress (409), completed or failed (replay)';

CREATE FUNCTION idem_complete(key text, owner uuid, result jsonb DEFAULT NULL,
                              namespace text DEFAULT 'default',
                              response_status integer DEFAULT NULL,
                              response_headers jsonb DEFAULT NULL,
                              response_body bytea DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_complete'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_complete(text, uuid, jsonb, text, integer, jsonb, bytea) IS
    'store the result (JSON, or an HTTP response) of the attempt that owner holds';

CREATE FUNCTION idem_fail(key text, owner uuid, error jsonb DEFAULT NULL,
                          retryable boolean DEFAULT false,
                          namespace text DEFAULT 'default',
                          response_status integer DEFAULT NULL,
                          response_headers jsonb DEFAULT NULL,
                          response_body bytea DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_fail'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_fail(text, uuid, jsonb, boolean, text, integer, jsonb, bytea) IS
    'store a permanent failure, or release the key when retryable';

CREATE FUNCTION idem_request_forget(key text, namespace text DEFAULT 'default')
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_request_forget'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_request_forget(text, text) IS
    'forget a stored request, whatever its state: the next idem_begin starts afresh';

CREATE OR REPLACE VIEW idem_requests AS
    SELECT n.name                           AS namespace,
           idempotency.idem_key_text(r.key) AS key,
           r.status, r.attempts, r.fingerprint, r.result,
           r.lease_expires_at, r.created_at, r.completed_at,
           e.expires_at,
           e.expires_at < now() AND NOT (r.status = 'in_progress'
                                         AND r.lease_expires_at > clock_timestamp())
                                            AS expired,
           r.response_status, r.response_headers, r.response_body, r.heartbeat_at
      FROM idempotency.requests r
      JOIN idem_namespaces n ON n.id = r.ns
     CROSS JOIN LATERAL
           (SELECT idempotency.idem_expires_at(coalesce(r.completed_at, r.created_at), n.ttl)
                   AS expires_at) e;
COMMENT ON VIEW idem_requests IS 'idem_begin records (owners are not shown)';

-- CREATE OR REPLACE VIEW resets the view's options
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW idem_requests SET (security_invoker = true);
    END IF;
END
$$;

DROP VIEW idem_stats;
DROP FUNCTION idempotency.idem_stats_read();
CREATE FUNCTION idempotency.idem_stats_read(
        OUT ns integer,
        OUT claims bigint,
        OUT duplicates bigint,
        OUT waits bigint,
        OUT fingerprint_mismatches bigint,
        OUT takeovers bigint,
        OUT busy bigint,
        OUT releases bigint,
        OUT purged bigint,
        OUT request_begins bigint,
        OUT request_replays bigint,
        OUT request_in_flight bigint,
        OUT request_mismatches bigint,
        OUT request_takeovers bigint,
        OUT request_failures bigint,
        OUT request_forgets bigint)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'idem_stats_read'
    LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW idem_stats AS
    SELECT n.name AS namespace,
           s.claims, s.duplicates, s.waits, s.fingerprint_mismatches,
           s.takeovers, s.busy, s.releases, s.purged,
           s.request_begins, s.request_replays, s.request_in_flight,
           s.request_mismatches, s.request_takeovers, s.request_failures,
           s.request_forgets
      FROM idempotency.idem_stats_read() s
      JOIN idem_namespaces n ON n.id = s.ns;
COMMENT ON VIEW idem_stats IS
    'per-namespace counters since server start (needs shared_preload_libraries)';

GRANT SELECT ON idem_stats TO PUBLIC;

-- One step for an application role (1.1): every table privilege the claim,
-- request, token and watermark paths check, as docs/privileges.md lists
-- them.  Per-namespace grants (idem_namespace_grant) stay separate.
CREATE FUNCTION idem_grant_app(role regrole)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM idempotency.idem_app_privileges(role, true);
END
$$;
COMMENT ON FUNCTION idem_grant_app(regrole) IS
    'grant a role what idem_claim, idem_begin, tokens and watermarks need (table privileges)';

CREATE FUNCTION idem_revoke_app(role regrole)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM idempotency.idem_app_privileges(role, false);
END
$$;
COMMENT ON FUNCTION idem_revoke_app(regrole) IS
    'revoke what idem_grant_app granted';

-- (executable by everyone: it runs as the caller, who must own the tables)
CREATE FUNCTION idempotency.idem_app_privileges(role regrole, grant_them boolean)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    rolename name;
    t record;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT r.rolname INTO rolename FROM pg_roles r WHERE r.oid = role;
    -- a GRANT by a role without the grant option only warns: refuse instead
    IF NOT pg_has_role(current_user,
                       (SELECT c.relowner FROM pg_class c
                         WHERE c.oid = 'idempotency.claims'::regclass), 'USAGE') THEN
        RAISE EXCEPTION 'permission denied to grant the privileges of the idempotency tables'
            USING ERRCODE = '42501',
                  HINT = 'Call it as the owner of the extension''s tables or a superuser.';
    END IF;
    FOR t IN SELECT * FROM (VALUES
            ('idempotency.claims',     'SELECT, INSERT, DELETE'),
            ('idempotency.requests',   'SELECT, INSERT, UPDATE, DELETE'),
            ('idempotency.tokens',     'SELECT, INSERT, DELETE'),
            ('idempotency.watermarks', 'SELECT, INSERT, UPDATE')) AS v(tab, privs)
    LOOP
        IF grant_them THEN
            EXECUTE format('GRANT %s ON TABLE %s TO %I', t.privs, t.tab, rolename);
        ELSE
            EXECUTE format('REVOKE %s ON TABLE %s FROM %I', t.privs, t.tab, rolename);
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem_grant_app(regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_revoke_app(regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_request_forget(text, text) FROM PUBLIC;
