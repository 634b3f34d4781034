/* idempotency--1.1.sql */

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

-- A namespace may have several rows, all with the same id: a transaction
-- that uses a new namespace writes a row of its own, adopting the id of a
-- row another transaction has in flight instead of waiting for it (see
-- src/namespace.c), so that first use never blocks.  The TTL is that of
-- the row defined last.  The purge removes redundant rows.
CREATE TABLE idempotency.namespaces (
    id          integer     NOT NULL,
    name        text        COLLATE "C" NOT NULL,
    ttl         interval    NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    defined_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT namespaces_name_check CHECK (octet_length(name) BETWEEN 1 AND 128),
    CONSTRAINT namespaces_ttl_check CHECK (ttl > interval '0' AND ttl <= interval '100 years')
);
CREATE INDEX namespaces_name_idx ON idempotency.namespaces (name);
CREATE INDEX namespaces_id_idx ON idempotency.namespaces (id);
-- No key (a namespace may have several rows), so its replica identity is
-- the whole row: a publication that publishes updates and deletes (FOR
-- TABLES IN SCHEMA idempotency) would otherwise refuse the purge's and
-- idem_namespace_define's changes to it on the publisher.
ALTER TABLE idempotency.namespaces REPLICA IDENTITY FULL;
ALTER SEQUENCE idempotency.namespace_id_seq OWNED BY idempotency.namespaces.id;
COMMENT ON TABLE idempotency.namespaces IS 'claim namespaces and the TTL of their claims; read them through idem_namespaces';

-- One row per namespace: the one defined last.
CREATE VIEW idem_namespaces AS
    SELECT DISTINCT ON (id) id, name, ttl, created_at, defined_at
      FROM idempotency.namespaces
     ORDER BY id, defined_at DESC;
COMMENT ON VIEW idem_namespaces IS 'claim namespaces and the TTL of their claims';

-- Any change to a table whose rows backends cache, by our functions or by
-- hand, must reach those caches.
CREATE FUNCTION idempotency.idem_table_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'idem_table_changed' LANGUAGE C;
CREATE TRIGGER namespaces_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.namespaces
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_table_changed();

-- One row per claim, kept small: see "Storage" in the README.  key is the
-- event id in the exact compact encoding of src/claimkey.c; fingerprint is
-- a 64-bit hash of the claim's fingerprint.  Column order matters to the C
-- code (src/catalog.h).  The index leads with key, which nearly always
-- decides a comparison on its own, so a probe calls one comparison function
-- per index tuple instead of two.  VACUUM does not truncate the table: that
-- would take an ACCESS EXCLUSIVE lock and stall every claim, and the purge
-- keeps the table from shrinking anyway.
CREATE TABLE idempotency.claims (
    claimed_at  timestamptz NOT NULL,
    ns          integer     NOT NULL,
    key         bytea       NOT NULL,
    fingerprint bigint,
    CONSTRAINT claims_pkey PRIMARY KEY (key, ns)
) WITH (vacuum_truncate = false);
COMMENT ON TABLE idempotency.claims IS 'claimed event ids; use the idem_claims view to read them';
-- relhassubclass set here, once: the worker's first generation then writes
-- no pg_class row of the claims table, so it never races a GRANT or other
-- change of that row (two concurrent updates of one catalog row fail with
-- "tuple concurrently updated").  Creating and dropping a child sets it;
-- only an ANALYZE of the table while it has no generation clears it.
CREATE TABLE idempotency.claims_relhassubclass () INHERITS (idempotency.claims);
DROP TABLE idempotency.claims_relhassubclass;

-- Generations of the claims (src/generation.c): tables
-- idempotency.claims_g<id> that inherit from idempotency.claims, one chain
-- per TTL class, each dropped whole once its claims have expired.  The
-- purge opens, seals and drops them; claims of namespaces with a TTL below
-- idempotency.generation_min_ttl stay in idempotency.claims.  A sealed
-- generation keeps the namespaces it holds, the newest claimed_at of each,
-- and a Bloom filter of its claims, so that a new id skips it.
CREATE SEQUENCE idempotency.generation_id_seq AS integer;
CREATE TABLE idempotency.generations (
    id            integer     NOT NULL,
    ttl_class     integer     NOT NULL,
    state         text        NOT NULL,
    opened_at     timestamptz NOT NULL DEFAULT now(),
    closed_at     timestamptz,
    sealed_at     timestamptz,
    claims        bigint,
    namespaces    integer[],
    last_claimed  timestamptz[],
    first_claimed timestamptz[],
    filter        bytea,
    filter_hashes integer,
    CONSTRAINT generations_pkey PRIMARY KEY (id),
    CONSTRAINT generations_state_check CHECK (state IN ('open', 'closed', 'sealed'))
);
CREATE UNIQUE INDEX generations_open_idx ON idempotency.generations (ttl_class) WHERE state = 'open';
ALTER TABLE idempotency.generations ALTER COLUMN filter SET STORAGE EXTERNAL;
ALTER SEQUENCE idempotency.generation_id_seq OWNED BY idempotency.generations.id;
COMMENT ON TABLE idempotency.generations IS 'generations of the claims; read them through idem_generations';
CREATE TRIGGER generations_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.generations
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_table_changed();

-- Declared state machines: each state maps to the states it may move to.
CREATE TABLE idempotency.machines (
    name        text        NOT NULL,
    transitions jsonb       NOT NULL,
    defined_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT machines_pkey PRIMARY KEY (name),
    CONSTRAINT machines_name_check CHECK (octet_length(name) BETWEEN 1 AND 128),
    CONSTRAINT machines_transitions_check CHECK (jsonb_typeof(transitions) = 'object')
);
COMMENT ON TABLE idempotency.machines IS 'state machines declared with idem_machine_define';

-- Tables whose status column follows a machine.  Columns are kept by name,
-- so a renamed column needs binding again.
CREATE TABLE idempotency.machine_bindings (
    rel             regclass    NOT NULL,
    status_column   name        NOT NULL,
    machine         text        NOT NULL,
    version_column  name,
    check_inserts   boolean     NOT NULL DEFAULT false,
    bound_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT machine_bindings_pkey PRIMARY KEY (rel)
);
COMMENT ON TABLE idempotency.machine_bindings IS 'tables bound to state machines with idem_machine_bind';

CREATE TRIGGER machines_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.machines
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_table_changed();
CREATE TRIGGER machine_bindings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.machine_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_table_changed();

-- User tables the purge keeps bounded (idem_purge_policy_add).
CREATE TABLE idempotency.purge_policies (
    rel         regclass    NOT NULL,
    time_column name        NOT NULL,
    ttl         interval    NOT NULL,
    added_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT purge_policies_pkey PRIMARY KEY (rel),
    CONSTRAINT purge_policies_ttl_check CHECK (ttl > interval '0' AND ttl <= interval '100 years')
);
COMMENT ON TABLE idempotency.purge_policies IS 'user tables purged by time column and TTL';

-- What the purge did: one row per table per round, bounded by
-- idempotency.purge_history.  Operational history, so not dumped.
CREATE TABLE idempotency.purge_runs (
    run_id       bigint      GENERATED ALWAYS AS IDENTITY,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    target       text        NOT NULL,
    trigger      text        NOT NULL CHECK (trigger IN ('worker', 'manual', 'procedure')),
    rows_deleted bigint      NOT NULL,
    batches      int         NOT NULL,
    timeouts     int         NOT NULL,
    error        text,
    application_name text,
    resume_after tid,           -- a worker run that stopped short: where the next goes on
    CONSTRAINT purge_runs_pkey PRIMARY KEY (run_id)
);
COMMENT ON TABLE idempotency.purge_runs IS 'history of purge rounds; read it through idem_purge_runs';

-- A dropped table takes its binding and purge policy with it, so that a
-- new table that happens to get the same OID inherits neither.  It fires
-- for every drop: a table also goes with DROP TYPE ... CASCADE (a typed
-- table), DROP OWNED, DROP SCHEMA ... CASCADE or DROP EXTENSION of an
-- extension that owns it.
CREATE FUNCTION idempotency.idem_forget_dropped_tables() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM idempotency.machine_bindings b
     USING pg_event_trigger_dropped_objects() d
     WHERE d.classid = 'pg_class'::regclass AND d.objid = b.rel::oid;
    DELETE FROM idempotency.purge_policies p
     USING pg_event_trigger_dropped_objects() d
     WHERE d.classid = 'pg_class'::regclass AND d.objid = p.rel::oid;
END $$;
CREATE EVENT TRIGGER idem_forget_dropped_tables ON sql_drop
    EXECUTE FUNCTION idempotency.idem_forget_dropped_tables();

-- API-style requests (idem_begin): a lease while the work runs, then the
-- stored result or error, replayed to every retry until the TTL.
CREATE TABLE idempotency.requests (
    key              bytea       NOT NULL,
    ns               integer     NOT NULL,
    status           text        NOT NULL,
    owner            uuid,
    attempts         integer     NOT NULL,
    fingerprint      text,
    result           jsonb,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    completed_at     timestamptz,
    response_status  integer,       -- 1.1: an HTTP-shaped result, replayed as it was
    response_headers jsonb,
    response_body    bytea,
    heartbeat_at     timestamptz,   -- 1.1: the owner's last start or idem_extend
    CONSTRAINT requests_pkey PRIMARY KEY (key, ns),
    CONSTRAINT requests_status_check CHECK (status IN ('in_progress', 'completed', 'failed'))
);
COMMENT ON TABLE idempotency.requests IS 'idem_begin records; read them through idem_requests';

-- Single-use tokens against double submits.
CREATE TABLE idempotency.tokens (
    token       uuid        NOT NULL,
    scope       text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    issued_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT tokens_pkey PRIMARY KEY (token)
);
COMMENT ON TABLE idempotency.tokens IS 'tokens issued by idem_token_issue and not yet consumed';

-- pg_dump must carry the claims: a restore that forgot them would process
-- every event again.  The same goes for requests and tokens; machines and
-- bindings are configuration.
SELECT pg_catalog.pg_extension_config_dump('idempotency.machines', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.machine_bindings', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.purge_policies', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.requests', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.tokens', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.namespaces', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.namespace_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.claims', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.generations', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.generation_id_seq', '');

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

-- The same with uuid ids, as drivers pass their UUID types: a uuid names the
-- same claim as its canonical text.
CREATE FUNCTION idem_claim(event_id uuid, namespace text DEFAULT 'default',
                           fingerprint text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_claim_uuid'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim(uuid, text, text) IS
    'claim a uuid event id in this transaction: true the first time, false for a duplicate';

CREATE FUNCTION idem_try_claim(event_id uuid, namespace text DEFAULT 'default',
                               fingerprint text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_try_claim_uuid'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_try_claim(uuid, text, text) IS
    'as idem_claim, but NULL at once instead of waiting for an in-flight claimer';

CREATE FUNCTION idem_claim_many(event_ids uuid[], namespace text DEFAULT 'default')
    RETURNS SETOF uuid
    AS 'MODULE_PATHNAME', 'idem_claim_many_uuid'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim_many(uuid[], text) IS
    'claim a batch of uuid event ids; returns the ids newly claimed';

CREATE FUNCTION idem_claimed(event_id uuid, namespace text DEFAULT 'default')
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_claimed_uuid'
    LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_claimed(uuid, text) IS
    'read-only check: does a live claim exist?';

CREATE FUNCTION idem_release(event_id uuid, namespace text DEFAULT 'default')
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_release_uuid'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_release(uuid, text) IS
    'remove a claim so that the event may be processed again';

CREATE FUNCTION idem_claims_import(event_id text, namespace text, claimed_at timestamptz,
                                   fingerprint_hash bigint DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_claims_import'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claims_import(text, text, timestamptz, bigint) IS
    'store a claim exported from another node (resharding), keeping its claimed_at and fingerprint';
REVOKE EXECUTE ON FUNCTION idem_claims_import(text, text, timestamptz, bigint) FROM PUBLIC;

-- On Citus: a claim kept with the shard of the row a handler writes, in a
-- namespace of its own for the shard (namespace, byte 0x1f, shard id), so
-- that a shard move takes its claims along (src/citusshard.c).
CREATE FUNCTION idem_citus_claim(event_id text, namespace text, shard bigint,
                                 fingerprint text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_citus_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_citus_claim(text, text, bigint, text) IS
    'idem_claim in a Citus handler, kept with the shard of the row it writes so that it moves with the shard';
CREATE FUNCTION idem_citus_release(event_id text, namespace text, shard bigint)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_citus_release'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_citus_release(text, text, bigint) IS
    'idem_release of a claim made with idem_citus_claim';

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
-- State machines
--
CREATE FUNCTION idem_machine_define(machine text, transitions jsonb)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_machine_define'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_machine_define(text, jsonb) IS
    'declare a state machine: {"STATE": ["NEXT", ...], ...}; redefining replaces it';

CREATE FUNCTION idem_machine_drop(machine text)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_machine_drop'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_machine_drop(text) IS
    'drop a state machine that no table is bound to';

CREATE FUNCTION idem_cas_status(machine text, current text, target text)
    RETURNS text
    AS 'MODULE_PATHNAME', 'idem_cas_status'
    LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_cas_status(text, text, text) IS
    'check a move: applied (an edge), already (same state) or rejected';

CREATE FUNCTION idem_machine_bind(rel regclass, status_column name, machine text,
                                  version_column name DEFAULT NULL,
                                  check_inserts boolean DEFAULT false)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_machine_bind'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_machine_bind(regclass, name, text, name, boolean) IS
    'bind a table''s status column to a state machine and install its guard trigger';

CREATE FUNCTION idem_machine_unbind(rel regclass)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_machine_unbind'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_machine_unbind(regclass) IS
    'remove a table''s binding and guard trigger';

CREATE FUNCTION idem_cas_row(rel regclass, key anyelement, target text,
                             expected_version bigint DEFAULT NULL)
    RETURNS text
    AS 'MODULE_PATHNAME', 'idem_cas_row'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_cas_row(regclass, anyelement, text, bigint) IS
    'compare-and-set a bound row''s status: applied, already, rejected, stale or missing';

CREATE FUNCTION idem_state_guard()
    RETURNS trigger
    AS 'MODULE_PATHNAME', 'idem_state_guard'
    LANGUAGE C;
COMMENT ON FUNCTION idem_state_guard() IS
    'trigger installed by idem_machine_bind: refuses illegal status transitions';

--
-- API-style idempotency: leases with stored results, tokens, keyed locks
--
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

CREATE FUNCTION idem_extend(key text, owner uuid, lease interval,
                            namespace text DEFAULT 'default')
    RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'idem_extend'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_extend(text, uuid, interval, text) IS
    'heartbeat: the lease owner holds now lasts lease from now; returns its new expiry';

CREATE FUNCTION idem_token_issue(scope text, ttl interval DEFAULT '10 minutes')
    RETURNS uuid
    AS 'MODULE_PATHNAME', 'idem_token_issue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_token_issue(text, interval) IS
    'issue a single-use token for a scope';

CREATE FUNCTION idem_token_consume(token uuid, scope text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_token_consume'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_token_consume(uuid, text) IS
    'consume a token: true exactly once';

CREATE FUNCTION idem_lock(key text)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_lock'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_lock(text) IS
    'lock a business key until the end of the transaction';

CREATE FUNCTION idem_try_lock(key text)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_try_lock'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_try_lock(text) IS
    'lock a business key until the end of the transaction, if free';

--
-- Purge
--
CREATE FUNCTION idem_generation_switch(namespace text DEFAULT NULL) RETURNS integer
    AS 'MODULE_PATHNAME', 'idem_generation_switch'
    LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_generation_switch(text) IS
    'open a new generation now for the TTL class of namespace (all classes if NULL), seal and drop what can be; returns the generations opened';

CREATE FUNCTION idem_purge(max_rows bigint DEFAULT NULL)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'idem_purge'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_purge(bigint) IS
    'purge expired claims, requests, tokens and policy rows now, in this transaction; returns the rows deleted';

CREATE PROCEDURE idem_purge_run(max_rows bigint DEFAULT NULL)
    AS 'MODULE_PATHNAME', 'idem_purge_run'
    LANGUAGE C;
COMMENT ON PROCEDURE idem_purge_run(bigint) IS
    'purge as the worker does, committing after each batch: CALL it from pg_cron or by hand';

CREATE FUNCTION idem_purge_policy_add(rel regclass, time_column name, ttl interval)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_purge_policy_add'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_purge_policy_add(regclass, name, interval) IS
    'make the purge delete rows of a table whose time column is older than ttl';

CREATE FUNCTION idem_purge_policy_remove(rel regclass)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_purge_policy_remove'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_purge_policy_remove(regclass) IS
    'stop purging a table';

CREATE VIEW idem_purge_runs AS
    SELECT current_database()        AS database,
           target                    AS "table",
           started_at,
           finished_at - started_at  AS duration,
           rows_deleted,
           batches,
           timeouts,
           error                     AS last_error,
           trigger,
           application_name,
           resume_after
      FROM idempotency.purge_runs;
COMMENT ON VIEW idem_purge_runs IS 'what the purge deleted, per table and round, newest history only';

--
-- Views
--
CREATE FUNCTION idempotency.idem_key_text(bytea)
    RETURNS text
    AS 'MODULE_PATHNAME', 'idem_key_text'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The expiry rule, the one SQL copy of IdemNamespaceExpiry (namespace.c):
-- since + ttl in calendar arithmetic done in UTC, so that the answer never
-- depends on the session's TimeZone.  Inlined where it is used; every name
-- is schema-qualified, since an inlined body resolves names with the
-- caller's search_path.
CREATE FUNCTION idempotency.idem_expires_at(since timestamptz, ttl interval)
    RETURNS timestamptz
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$SELECT pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', since) OPERATOR(pg_catalog.+) ttl)$$;

CREATE VIEW idem_claims AS
    SELECT pg_catalog.split_part(n.name, E'\x1f', 1) AS namespace,
           idempotency.idem_key_text(c.key) AS event_id,
           c.claimed_at,
           e.expires_at,
           e.expires_at < now()            AS expired,
           c.fingerprint                   AS fingerprint_hash
      FROM idempotency.claims c
      JOIN idem_namespaces n ON n.id = c.ns
     CROSS JOIN LATERAL
           (SELECT idempotency.idem_expires_at(c.claimed_at, n.ttl) AS expires_at) e;
COMMENT ON VIEW idem_claims IS 'stored claims, expired ones included until purged';

-- The generations of the claims, with what each holds and when it goes.
-- expires_at is when its last claim expires under today's TTLs: the purge
-- drops it after that.  NULL while it is open or closed.
CREATE FUNCTION idempotency.idem_generation_filter(generation integer) RETURNS text
    AS 'MODULE_PATHNAME', 'idem_generation_filter'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_generation_filter(integer) IS
    'what shared memory holds of a sealed generation''s filter: a stripe lane, its finer filter, the stored one, or NULL';

CREATE VIEW idem_generations AS
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
COMMENT ON VIEW idem_generations IS 'generations of the claims: open, closed or sealed, and when each is dropped';

CREATE VIEW idem_requests AS
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

CREATE FUNCTION idem_stats_reset()
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_stats_reset'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_stats_reset() IS 'zero the idem_stats counters of this database';

--
-- Privileges.  Claims are governed by table privileges on
-- idempotency.claims, checked as the caller: INSERT to claim, SELECT to
-- check, DELETE to release.  Nobody but the owner has them until granted.
-- Requests and tokens likewise: INSERT and UPDATE on idempotency.requests
-- to begin, UPDATE to complete or fail (DELETE for a retryable failure);
-- INSERT on idempotency.tokens to issue, DELETE to consume.  Keyed locks,
-- like pg_advisory_xact_lock, are open to everyone.
-- Defining namespaces and machines and resetting statistics are for
-- administrators.  Binding a table needs its ownership; a row CAS needs
-- UPDATE on the bound columns, checked as the caller.
--
REVOKE ALL ON FUNCTION idem_namespace_define(text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_machine_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_machine_drop(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idem_forget_dropped_tables() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_purge(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_generation_switch(text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE idem_purge_run(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idem_table_changed() FROM PUBLIC;
GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
GRANT SELECT ON idempotency.namespaces, idempotency.machines,
                idempotency.machine_bindings TO PUBLIC;
GRANT SELECT ON idem_stats, idem_namespaces TO PUBLIC;
REVOKE ALL ON idem_generations FROM PUBLIC;
GRANT SELECT ON idempotency.purge_policies TO PUBLIC;

-- With security_invoker (PostgreSQL 15 and later), reading idem_claims
-- needs SELECT on idempotency.claims, like any other read of claims.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW idem_claims SET (security_invoker = true);
        ALTER VIEW idem_requests SET (security_invoker = true);
        GRANT SELECT ON idem_claims, idem_requests TO PUBLIC;
    END IF;
END
$$;

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
