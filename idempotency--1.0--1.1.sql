/* idempotency--1.0--1.1.sql: ordered-stream watermarks */

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
