"""Request handlers, one module per area; one `handle_<api>` per API."""
