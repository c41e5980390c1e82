"""Page recordings and eased scroll videos (`/animate`); not built yet."""
