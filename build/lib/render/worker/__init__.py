"""The worker process: its main loop, the warm runtime, job endings and the RQ job functions."""
