-- Requests with HTTP-shaped results (1.1): a stored status, headers and
-- body replayed as they were; the Retry-After hint; idem_fail without a
-- payload; the request counters of idem_stats; idem_request_forget;
-- idem_grant_app and idem_revoke_app; every error
SET client_min_messages = warning;
SELECT idem_namespace_define('http', '1 day');
SELECT idem_stats_reset();

-- a 201 with headers and a body; replayed byte for byte, JSON result NULL
SELECT owner AS o1 FROM idem_begin('h-1', 'http', 'sha:1') \gset
SELECT idem_complete('h-1', :'o1', response_status => 201,
                     response_headers => '{"content-type": "application/json", "location": "/payments/ch_1"}',
                     response_body => convert_to('{"id":"ch_1","amount":100}', 'UTF8'),
                     namespace => 'http');
SELECT status, owner, result, attempts, response_status, response_headers,
       convert_from(response_body, 'UTF8') AS body, retry_after
  FROM idem_begin('h-1', 'http', 'sha:1');
-- a binary body comes back as it went in
SELECT owner AS o2 FROM idem_begin('h-2', 'http') \gset
SELECT idem_complete('h-2', :'o2', '{"ok": true}', 'http', 200, NULL, '\x00ff10'::bytea);
SELECT result, response_status, response_headers, response_body FROM idem_begin('h-2', 'http');
SELECT key, status, response_status, response_body FROM idem_requests
 WHERE namespace = 'http' ORDER BY key;

-- a stored failure with a response (a 402 from the provider), replayed
SELECT owner AS o3 FROM idem_begin('h-3', 'http') \gset
SELECT idem_fail('h-3', :'o3', '{"code": "card_declined"}', false, 'http',
                 402, '{"content-type": "application/json"}', convert_to('{"error":"card_declined"}', 'UTF8'));
SELECT status, result, response_status, convert_from(response_body, 'UTF8') AS body
  FROM idem_begin('h-3', 'http');

-- a retryable failure needs no payload: the key is released
SELECT owner AS o4 FROM idem_begin('h-4', 'http') \gset
SELECT idem_fail('h-4', :'o4', retryable => true, namespace => 'http');
SELECT count(*) AS h4_rows FROM idem_requests WHERE key = 'h-4';
SELECT status, attempts FROM idem_begin('h-4', 'http');

-- in progress: a Retry-After hint of at least 100 ms, at most the lease
-- left; it grows with the time since the owner's start or heartbeat
SELECT owner AS o5 FROM idem_begin('h-5', 'http', lease => '20 seconds') \gset
SELECT status, owner, response_status,
       retry_after >= interval '100 milliseconds' AS at_least_100ms,
       retry_after <= lease_expires_at - now() AS within_lease
  FROM idem_begin('h-5', 'http');
UPDATE idempotency.requests SET heartbeat_at = clock_timestamp() - interval '5 seconds'
 WHERE idempotency.idem_key_text(key) = 'h-5';
SELECT retry_after >= interval '5 seconds' AND retry_after < interval '6 seconds' AS about_5s
  FROM idem_begin('h-5', 'http');
-- a heartbeat resets it
SELECT idem_extend('h-5', :'o5', '20 seconds', 'http') > now() AS extended;
SELECT retry_after < interval '1 second' AS short_again FROM idem_begin('h-5', 'http');
-- and it never passes the lease's end
UPDATE idempotency.requests SET heartbeat_at = clock_timestamp() - interval '1 hour'
 WHERE idempotency.idem_key_text(key) = 'h-5';
SELECT retry_after <= interval '20 seconds' AS capped FROM idem_begin('h-5', 'http');

-- a mismatch: ID001 whose detail carries nothing of the stored request
CREATE FUNCTION pg_temp.mismatch(k text, fp text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    PERFORM idem_begin(k, 'http', fp);
    RETURN NEXT 'no error';
EXCEPTION WHEN SQLSTATE 'ID001' THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN NEXT d;
END
$$;
SELECT * FROM pg_temp.mismatch('h-1', 'sha:other');

-- a lease taken over counts as a begin and a takeover
UPDATE idempotency.requests SET lease_expires_at = clock_timestamp() - interval '1 second'
 WHERE idempotency.idem_key_text(key) = 'h-5';
SELECT status, attempts FROM idem_begin('h-5', 'http');

-- the counters: begins h-1..h-5, h-4 again and h-5's takeover (7);
-- replays h-1, h-2, h-3 (3); in flight: h-5 four times; one mismatch;
-- one takeover; failures h-3, h-4 (2)
SELECT request_begins, request_replays, request_in_flight, request_mismatches,
       request_takeovers, request_failures, request_forgets
  FROM idem_stats WHERE namespace = 'http';

-- an administrator forgets a stored request: the next begin starts afresh
SELECT idem_request_forget('h-1', 'http') AS forgot;
SELECT idem_request_forget('h-1', 'http') AS forgot_again;
SELECT idem_request_forget('h-1', 'no_such_namespace') AS unknown_namespace;
SELECT status, attempts FROM idem_begin('h-1', 'http', 'sha:other');
-- forgetting an attempt in flight: its owner can no longer finish it
SELECT owner AS o6 FROM idem_begin('h-6', 'http') \gset
SELECT idem_request_forget('h-6', 'http') AS forgot_in_flight;
SELECT idem_complete('h-6', :'o6', '{}', 'http');
\echo :LAST_ERROR_SQLSTATE
SELECT request_forgets FROM idem_stats WHERE namespace = 'http';

-- errors
SELECT owner AS o7 FROM idem_begin('h-7', 'http') \gset
SELECT idem_complete('h-7', :'o7', namespace => 'http');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', 99);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', 600);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', 200, '["content-type"]');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', 200, '"text/plain"');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', 200, '{"x-count": 3}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('h-7', :'o7', NULL, 'http', NULL, NULL, '\x00'::bytea);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('h-7', :'o7', NULL, false, 'http', 700);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_request_forget(NULL, 'http');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_request_forget('', 'http');
\echo :LAST_ERROR_SQLSTATE
-- nothing was stored by the refused calls
SELECT status, response_status FROM idem_requests WHERE key = 'h-7';

-- idem_grant_app: one call, and an application role claims and serves
-- requests; idem_revoke_app takes it back
CREATE ROLE idem_http_app;
SELECT idem_grant_app('idem_http_app');
SET ROLE idem_http_app;
SELECT idem_claim('evt-1', 'http') AS claimed;
SELECT status FROM idem_begin('h-app', 'http');
SELECT count(*) FROM idem_requests WHERE key = 'h-app';
SELECT idem_token_issue('checkout') IS NOT NULL AS token;
SELECT idem_advance('http-stream', 0, 1) AS advanced;
-- the administrator's functions stay refused
SELECT idem_request_forget('h-app', 'http');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_grant_app('idem_http_app');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT idem_revoke_app('idem_http_app');
SET ROLE idem_http_app;
SELECT idem_claim('evt-2', 'http');
\echo :LAST_ERROR_SQLSTATE
SELECT status FROM idem_begin('h-app-2', 'http');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- a role that does not own the tables cannot grant them (a GRANT would
-- only warn)
CREATE ROLE idem_http_admin;
GRANT EXECUTE ON FUNCTION idem_grant_app(regrole) TO idem_http_admin;
SET ROLE idem_http_admin;
SELECT idem_grant_app('idem_http_app');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT idem_grant_app(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_grant_app('no_such_role');
\echo :LAST_ERROR_SQLSTATE

-- clean up
DELETE FROM idempotency.requests WHERE ns = (SELECT id FROM idem_namespaces WHERE name = 'http');
DELETE FROM idempotency.watermarks WHERE stream = 'http-stream';
DELETE FROM idempotency.tokens WHERE scope = 'checkout';
SELECT idem_release('evt-1', 'http');
REVOKE EXECUTE ON FUNCTION idem_grant_app(regrole) FROM idem_http_admin;
DROP ROLE idem_http_app;
DROP ROLE idem_http_admin;
