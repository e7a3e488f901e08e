"""Exception tree shared by every layer; the API and CLI map these to status and exit codes."""

from __future__ import annotations


class OfficeError(Exception):
    """Base of every error the product raises on purpose.

    Attributes:
        code: a stable machine-readable code (``not_found``, ``invalid``, ``conflict``...).
        field: the input field at fault, when one is.
    """

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFoundError(OfficeError):
    """The named entity does not exist (or is not visible to the caller)."""

    code = "not_found"


class InvalidInputError(OfficeError):
    """Input failed validation; ``field`` names the offending field."""

    code = "invalid"


class ConflictError(OfficeError):
    """The change conflicts with the current state (duplicate name, wrong state...)."""

    code = "conflict"


class AuthError(OfficeError):
    """Missing, wrong, expired or revoked credentials."""

    code = "unauthorized"


class ForbiddenError(OfficeError):
    """Valid credentials that may not do this."""

    code = "forbidden"


class ConfigurationError(OfficeError):
    """The office's configuration cannot serve the request (e.g. no executor)."""

    code = "configuration"


class BusyError(OfficeError):
    """Nothing was written because of concurrent work; the same request may be sent again.

    Attributes:
        retry_after_s: a suggested wait before sending it again, in seconds.
    """

    code = "busy"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DatabaseLockedError(OfficeError):
    """Another scheduler process already runs the loops against this SQLite file."""

    code = "database_locked"


class IdempotencyKeyReusedError(InvalidInputError):
    """An idempotency key came back with a request other than the one it was first used for.

    The IETF ``Idempotency-Key`` HTTP header draft answers such a reuse with 422; the same
    key with the same request is a silent duplicate instead.

    Attributes:
        key: the key as the caller sent it.
    """

    code = "idempotency_key_reused"

    def __init__(self, key: str, *, field: str = "idempotency_key") -> None:
        super().__init__(
            f"idempotency key {key!r} was already used with a different request; "
            "send a new key for a new request",
            field=field,
        )
        self.key = key
