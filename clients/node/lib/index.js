'use strict';
// Client for the idempotency PostgreSQL extension.
const errors = require('./errors');
const { claim } = require('./consumer');
const http = require('./http');
const { idempotent } = require('./express');

module.exports = {
  ...errors,
  claim,
  Idempotency: http.Idempotency,
  Attempt: http.Attempt,
  defaultFingerprint: http.defaultFingerprint,
  canonicalBody: http.canonicalBody,
  DEFAULT_STORED_HEADERS: http.DEFAULT_STORED_HEADERS,
  idempotent,
};
