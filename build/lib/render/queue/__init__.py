"""The queue: the Redis client, every key name, job records, heartbeats, the quota ledger and async job endings."""
