// Typings for the idempotency client.
import { EventEmitter } from 'node:events';

export interface Queryable {
  query(config: { text: string; values?: unknown[] }): Promise<{ rows: any[]; rowCount: number | null }>;
}

export interface PoolLike extends Queryable {
  end?(): Promise<void>;
}

export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

export class IdempotencyError extends Error {
  /** The server's SQLSTATE. */
  sqlstate: string | null;
  /** The driver's error. */
  cause?: unknown;
  constructor(message: string, options?: { sqlstate?: string; cause?: unknown });
}
/** ID001: a key or event id reused with another payload (HTTP 422). */
export class FingerprintMismatch extends IdempotencyError {}
/** ID002: a state machine refused a transition. */
export class IllegalTransition extends IdempotencyError {}
/** ID003: a state the machine does not declare. */
export class UnknownState extends IdempotencyError {}
/** ID004: this attempt no longer holds the request's key. */
export class LeaseNotHeld extends IdempotencyError {}
/** ID005: a watermark's epoch is below the partition's highest. */
export class Fenced extends IdempotencyError {}
/** 55006: idem_begin of a key this transaction started and did not finish. */
export class KeyHeldByThisTransaction extends IdempotencyError {}
/** 57014 or 55P03: statement_timeout or lock_timeout while waiting. */
export class IdempotencyTimeout extends IdempotencyError {}

/** The typed error for a pg error, or null if it is not one of ours. */
export function translate(err: unknown): IdempotencyError | null;
/** One unnamed (never prepared) statement, throwing typed errors. */
export function query(client: Queryable, text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;

/** Claim eventId in a transaction of client, run fn inside it, commit (or roll back on a throw). */
export function claim<T>(
  client: Queryable,
  eventId: string | number,
  namespace: string,
  fn: (first: boolean, client: Queryable) => T | Promise<T>,
  options?: { fingerprint?: string | null },
): Promise<T>;
export function claim<T>(
  client: Queryable,
  eventId: string | number,
  fn: (first: boolean, client: Queryable) => T | Promise<T>,
): Promise<T>;

export type HeaderPairs = Array<[string, string | number | string[]]>;

export interface IdempotentRequest {
  method: string;
  path: string;
  /** lower-case names */
  headers: Record<string, string | string[] | undefined>;
  body?: Buffer | string | null;
  /** the framework's own request, when an adapter made this one */
  req?: unknown;
}

export interface IdempotentResponse {
  status: number;
  headers: HeaderPairs | Record<string, string | number | string[] | undefined>;
  body: Buffer | string;
}

export interface IdempotencyOptions {
  pool?: PoolLike;
  connectionString?: string;
  namespace?: string;
  header?: string;
  required?: boolean;
  scope?: ((req: IdempotentRequest) => string) | null;
  fingerprint?: ((req: IdempotentRequest) => string) | null;
  /** seconds */
  lease?: number;
  heartbeat?: boolean;
  heartbeatPool?: PoolLike | null;
  /** seconds; keep null behind a transaction pooler */
  wait?: number | null;
  methods?: string[];
  storedHeaders?: string[];
  logger?: Logger;
}

export class Attempt extends EventEmitter {
  readonly idem: Idempotency;
  /** the stored key (scope:key with a scope) */
  readonly key: string;
  readonly owner: string;
  readonly attempts: number;
  /** true once the heartbeat learned that another attempt took the key over */
  leaseLost: boolean;
  /** finish or abort was called */
  done: boolean;
  finish(resp: IdempotentResponse): Promise<IdempotentResponse>;
  abort(): Promise<void>;
  on(event: 'leaseLost', listener: (err: LeaseNotHeld) => void): this;
  once(event: 'leaseLost', listener: (err: LeaseNotHeld) => void): this;
}

export class Idempotency {
  constructor(options: IdempotencyOptions);
  readonly pool: PoolLike;
  readonly heartbeatPool: PoolLike;
  readonly namespace: string;
  readonly header: string;
  readonly lease: number;
  readonly methods: Set<string>;
  readonly storedHeaders: Set<string>;
  begin(req: IdempotentRequest): Promise<null | { response: IdempotentResponse } | Attempt>;
  /** Close the pool made from connectionString. */
  end(): Promise<void>;
}

export function defaultFingerprint(req: IdempotentRequest): string;
export function canonicalBody(body: Buffer | string | null | undefined): Buffer;
export const DEFAULT_STORED_HEADERS: string[];

/** Express middleware: app.post(path, idempotent(idem), handler). */
export function idempotent(idem: Idempotency): (req: any, res: any, next: (err?: unknown) => void) => void;
