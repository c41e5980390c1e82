"""Page recordings and eased scroll videos (`/animate`): validated by the API (animate.options), recorded by
the workers (animate.recorder)."""
