"""The output: image post-processing, effects, metadata, documents and vision."""
