'use strict';
// Typed errors, thrown from the extension's SQLSTATEs.

class IdempotencyError extends Error {
  /** sqlstate is the server's code; cause the driver's error. */
  constructor(message, { sqlstate, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    if (sqlstate !== undefined) this.sqlstate = sqlstate;
  }
}
IdempotencyError.prototype.sqlstate = null;

function define(name, sqlstate) {
  const cls = { [name]: class extends IdempotencyError {} }[name];
  cls.prototype.sqlstate = sqlstate;
  return cls;
}

/** ID001: a key or event id reused with another payload (HTTP 422). */
const FingerprintMismatch = define('FingerprintMismatch', 'ID001');
/** ID002: a state machine refused a transition. */
const IllegalTransition = define('IllegalTransition', 'ID002');
/** ID003: a state the machine does not declare. */
const UnknownState = define('UnknownState', 'ID003');
/** ID004: this attempt no longer holds the request's key. */
const LeaseNotHeld = define('LeaseNotHeld', 'ID004');
/** ID005: a watermark's epoch is below the partition's highest. */
const Fenced = define('Fenced', 'ID005');
/** 55006: idem_begin of a key this transaction started and did not finish. */
const KeyHeldByThisTransaction = define('KeyHeldByThisTransaction', '55006');
/** 57014 or 55P03: statement_timeout or lock_timeout while waiting. */
const IdempotencyTimeout = define('IdempotencyTimeout', null);

const BY_SQLSTATE = {
  ID001: FingerprintMismatch,
  ID002: IllegalTransition,
  ID003: UnknownState,
  ID004: LeaseNotHeld,
  ID005: Fenced,
  55006: KeyHeldByThisTransaction,
  57014: IdempotencyTimeout,
  '55P03': IdempotencyTimeout,
};

/** The typed error for a pg error, or null if it is not one of ours. */
function translate(err) {
  const code = err && err.code;
  const Cls = typeof code === 'string' ? BY_SQLSTATE[code] : undefined;
  if (Cls === undefined) return null;
  return new Cls(err.message, { sqlstate: code, cause: err });
}

/**
 * Run one statement as an unnamed (never prepared) query, safe behind a
 * transaction pooler, throwing the typed error for the extension's errors.
 * client is a pg Client, PoolClient or Pool.
 */
async function query(client, text, values = []) {
  try {
    return await client.query({ text, values });
  } catch (err) {
    throw translate(err) || err;
  }
}

module.exports = {
  IdempotencyError,
  FingerprintMismatch,
  IllegalTransition,
  UnknownState,
  LeaseNotHeld,
  Fenced,
  KeyHeldByThisTransaction,
  IdempotencyTimeout,
  translate,
  query,
};
