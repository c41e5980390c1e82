"""The deliverer program (`screenshot-service webhooks`): webhook deliveries and monitor runs, RQ jobs on its own
queues with RQ's scheduler (main)."""
