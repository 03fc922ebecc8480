"""Security: TLS contexts for listeners (ssl_context.py); principals, SASL and the authorizer come next."""
