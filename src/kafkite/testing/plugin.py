"""pytest plugin: fixtures kafka_bootstrap and kafkite_cluster (filled in by the testing issue)."""
