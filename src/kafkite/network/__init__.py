"""kafkite.network: Trio listeners and one task per client connection (TLS, SASL, frames, in-order responses); hands
each request with its principal and listener to the request handler (server/router.py)."""
