"""The API program (`screenshot-service api`): the HTTP routes, their authentication, quota and concurrency, the one
capture path every route uses (capture_path), the hand-off to render workers (dispatch), and the answers."""
