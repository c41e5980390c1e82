"""Errors of the storage package; callers map them to `storage_access_denied`."""


class StorageError(Exception):
    """The backend could not read or write; the message names the bucket or directory problem. `transient`: the
    store may well answer a later try (it did not answer, or answered that it is busy or failing)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
