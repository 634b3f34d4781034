"""Client for the idempotency PostgreSQL extension."""
from .consumer import claim
from .errors import (Fenced, FingerprintMismatch, IdempotencyError, IdempotencyTimeout,
                     IllegalTransition, KeyHeldByThisTransaction, LeaseNotHeld, UnknownState,
                     translate)
from .http import Attempt, Idempotency, Request, Response, default_fingerprint

__all__ = ["claim", "Idempotency", "Attempt", "Request", "Response", "default_fingerprint",
           "IdempotencyError", "FingerprintMismatch", "IllegalTransition", "UnknownState",
           "LeaseNotHeld", "Fenced", "KeyHeldByThisTransaction", "IdempotencyTimeout",
           "translate"]
__version__ = "1.1.0"
