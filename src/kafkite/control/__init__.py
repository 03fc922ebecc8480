"""The test control plane: faults and the request log of a running broker, over HTTP/JSON (http.py) and the CLI
(`kafkite control`). The model is kafkite.testing.faults.Faults, the same the in-process KafkiteCluster uses."""
