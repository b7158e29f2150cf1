#!/bin/sh
# Registers the namespace iam uses, once Temporal answers (the server image
# does not create one). Safe to repeat.
set -eu
temporal operator cluster health --address "$TEMPORAL_ADDRESS"
temporal operator namespace describe -n "$NAMESPACE" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 ||
	temporal operator namespace create -n "$NAMESPACE" --retention 168h --address "$TEMPORAL_ADDRESS"
echo "Temporal namespace $NAMESPACE ready"
