"""kafkite.network: Trio listeners, their limits (quotas.py: connection counts, the request memory pool, the accept
loop) and one task per client connection (TLS, SASL, frames, in-order responses); hands
each request with its principal and listener to the request handler (server/router.py)."""
