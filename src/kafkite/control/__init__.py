"""The test control plane: one model of a broker process's controls (model.py: errors, drops, latency, holds,
version caps, the request log; responses.py builds what they answer), and three doors onto it: the in-process
API (BrokerThread/KafkiteCluster `.faults`), HTTP/JSON (routes.py, served by http.py; views.py reads partition
and group state and moves leaders) and the CLI (`kafkite control`, cli.py)."""
