'use strict';
// Claims for consumers: the dedup commits with the business write.
const { query } = require('./errors');

/**
 * Claim eventId in a transaction of client and run fn(first, client), the
 * business write, inside it:
 *
 *   await claim(client, msg.id, 'orders', async (first, tx) => {
 *     if (first) await tx.query('UPDATE accounts ...');
 *   });
 *   msg.ack();
 *
 * The claim and the write commit together when fn resolves, or roll back
 * together when it throws (a redelivery then finds no claim).  client is a
 * pg Client or a PoolClient (not a Pool: the transaction needs one
 * connection).  Resolves to fn's result.
 */
async function claim(client, eventId, namespace = 'default', fn, { fingerprint = null } = {}) {
  if (typeof namespace === 'function') {
    [namespace, fn] = ['default', namespace];
  }
  await client.query('BEGIN');
  try {
    const { rows } = fingerprint == null
      ? await query(client, 'SELECT idem_claim($1::text, $2) AS first', [String(eventId), namespace])
      : await query(client, 'SELECT idem_claim($1::text, $2, $3) AS first',
        [String(eventId), namespace, fingerprint]);
    const out = await fn(rows[0].first, client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch (_) {
      // the connection is gone: its transaction is too
    }
    throw err;
  }
}

module.exports = { claim };
