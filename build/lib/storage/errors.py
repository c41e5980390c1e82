"""Errors of the storage package; callers map them to `storage_access_denied`."""


class StorageError(Exception):
    """The backend could not read or write; the message names the bucket or directory problem."""
